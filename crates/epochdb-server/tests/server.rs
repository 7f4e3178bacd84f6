//! The server driven by a real client library (the `redis` crate): the
//! commands and their Redis replies, MULTI/EXEC/WATCH under concurrent
//! clients, pipelining, expiry, AUTH and ACL denial, limits, and a parser
//! fed arbitrary bytes.

mod types;

use epochdb::{Durability, Options};
use epochdb_server::{AppendFsync, Config, Server};
use redis::{Commands, Connection, RedisResult, Value};
use std::io::{Read, Write};
use std::time::Duration;

fn start(config: Config) -> Server {
    Server::start(Config { port: 0, threads: 2, ..config }).expect("start")
}

fn connect(server: &Server) -> Connection {
    let url = format!("redis://{}/", server.local_addr());
    redis::Client::open(url).expect("client").get_connection().expect("connect")
}

fn cmd(c: &mut Connection, args: &[&str]) -> RedisResult<Value> {
    let mut r = redis::cmd(args[0]);
    for a in &args[1..] {
        r.arg(*a);
    }
    r.query(c)
}

fn err(c: &mut Connection, args: &[&str]) -> String {
    match cmd(c, args) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} gave {v:?}, not an error"),
    }
}

/// A port in use is refused, as Redis refuses it, though the event loops
/// share theirs with SO_REUSEPORT.
#[test]
fn a_second_server_cannot_take_a_port_in_use() {
    let server = start(Config::default());
    let port = server.local_addr().port();
    let second = Server::start(Config { port, threads: 2, ..Config::default() });
    assert!(second.is_err(), "a second server started on port {port}");
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["PING"]).unwrap(), Value::SimpleString("PONG".into()));
}

#[test]
fn strings_behave_as_in_redis() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let _: () = c.set("k", "v").unwrap();
    assert_eq!(c.get::<_, String>("k").unwrap(), "v");
    assert_eq!(c.get::<_, Option<String>>("missing").unwrap(), None);
    assert_eq!(cmd(&mut c, &["SET", "k", "w", "NX"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["SET", "k", "w", "XX", "GET"]).unwrap(), Value::BulkString(b"v".to_vec()));
    assert_eq!(
        cmd(&mut c, &["SET", "n", "1", "NX", "XX"]).unwrap_err().to_string(),
        "An error was signalled by the server - ResponseError: syntax error"
    );
    assert_eq!(c.incr::<_, _, i64>("n", 5).unwrap(), 5);
    assert_eq!(c.decr::<_, _, i64>("n", 2).unwrap(), 3);
    assert!(err(&mut c, &["INCR", "k"]).contains("value is not an integer or out of range"));
    let _: () = c.set("big", i64::MAX).unwrap();
    assert!(err(&mut c, &["INCR", "big"]).contains("increment or decrement would overflow"));
    assert_eq!(cmd(&mut c, &["INCRBYFLOAT", "f", "10.5"]).unwrap(), Value::BulkString(b"10.5".to_vec()));
    assert_eq!(cmd(&mut c, &["INCRBYFLOAT", "f", "0.25"]).unwrap(), Value::BulkString(b"10.75".to_vec()));
    assert_eq!(c.append::<_, _, i64>("s", "Hello").unwrap(), 5);
    assert_eq!(c.append::<_, _, i64>("s", " World").unwrap(), 11);
    assert_eq!(c.strlen::<_, i64>("s").unwrap(), 11);
    assert_eq!(c.getrange::<_, String>("s", -5, -1).unwrap(), "World");
    assert_eq!(c.getrange::<_, String>("s", 0, 100).unwrap(), "Hello World");
    assert_eq!(c.setrange::<_, _, i64>("s", 6, "Redis").unwrap(), 11);
    assert_eq!(c.get::<_, String>("s").unwrap(), "Hello Redis");
    assert_eq!(c.setrange::<_, _, i64>("pad", 3, "x").unwrap(), 4);
    assert_eq!(c.get::<_, Vec<u8>>("pad").unwrap(), b"\0\0\0x");
    let _: () = c.mset(&[("a", "1"), ("b", "2")]).unwrap();
    assert_eq!(
        c.mget::<_, Vec<Option<String>>>(&["a", "nope", "b"]).unwrap(),
        [Some("1".into()), None, Some("2".into())]
    );
    assert_eq!(cmd(&mut c, &["MSETNX", "a", "9", "c", "3"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["MSETNX", "c", "3", "d", "4"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SETNX", "c", "x"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["GETSET", "c", "new"]).unwrap(), Value::BulkString(b"3".to_vec()));
    assert_eq!(cmd(&mut c, &["GETDEL", "c"]).unwrap(), Value::BulkString(b"new".to_vec()));
    assert_eq!(c.exists::<_, i64>("c").unwrap(), 0);
    assert!(err(&mut c, &["GET"]).contains("wrong number of arguments for 'get' command"));
    assert!(err(&mut c, &["NOSUCH", "x"]).contains("unknown command 'NOSUCH', with args beginning with: 'x'"));
    let long = "k".repeat(2000);
    assert!(err(&mut c, &["SET", &long, "v"]).contains("key is too long"));
}

#[test]
fn keyspace_hashes_and_types() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let _: () = c.set("s", "v").unwrap();
    assert_eq!(c.hset::<_, _, _, i64>("h", "f1", "v1").unwrap(), 1);
    assert_eq!(cmd(&mut c, &["HSET", "h", "f1", "x", "f2", "v2"]).unwrap(), Value::Int(1));
    assert_eq!(c.hget::<_, _, String>("h", "f1").unwrap(), "x");
    assert_eq!(c.hlen::<_, i64>("h").unwrap(), 2);
    assert_eq!(c.hkeys::<_, Vec<String>>("h").unwrap(), ["f1", "f2"]);
    assert_eq!(c.hvals::<_, Vec<String>>("h").unwrap(), ["x", "v2"]);
    assert_eq!(
        c.hgetall::<_, Vec<(String, String)>>("h").unwrap(),
        [("f1".into(), "x".into()), ("f2".into(), "v2".into())]
    );
    assert_eq!(c.hexists::<_, _, i64>("h", "f2").unwrap(), 1);
    assert_eq!(cmd(&mut c, &["HSETNX", "h", "f2", "no"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["HINCRBY", "h", "n", "7"]).unwrap(), Value::Int(7));
    assert_eq!(cmd(&mut c, &["HINCRBYFLOAT", "h", "fl", "1.5"]).unwrap(), Value::BulkString(b"1.5".to_vec()));
    assert_eq!(
        cmd(&mut c, &["HMGET", "h", "f1", "zz"]).unwrap(),
        Value::Array(vec![Value::BulkString(b"x".to_vec()), Value::Nil])
    );
    assert_eq!(cmd(&mut c, &["HSTRLEN", "h", "f2"]).unwrap(), Value::Int(2));
    assert!(err(&mut c, &["HGET", "s", "f"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["GET", "h"]).contains("WRONGTYPE"));
    assert_eq!(cmd(&mut c, &["TYPE", "h"]).unwrap(), Value::SimpleString("hash".into()));
    assert_eq!(cmd(&mut c, &["TYPE", "s"]).unwrap(), Value::SimpleString("string".into()));
    assert_eq!(cmd(&mut c, &["TYPE", "none"]).unwrap(), Value::SimpleString("none".into()));
    assert_eq!(cmd(&mut c, &["HDEL", "h", "f1", "f2", "n", "fl"]).unwrap(), Value::Int(4));
    assert_eq!(c.exists::<_, i64>("h").unwrap(), 0, "a hash with no fields is gone");
    // A string overwriting a hash removes its fields.
    let _: () = c.hset("h2", "f", "v").unwrap();
    let _: () = c.set("h2", "plain").unwrap();
    let _: () = c.hset("h2x", "f", "v").unwrap();
    assert_eq!(c.get::<_, String>("h2").unwrap(), "plain");
    for i in 0..30 {
        let _: () = c.set(format!("user:{i:02}"), i).unwrap();
    }
    let mut keys: Vec<String> = c.keys("user:1*").unwrap();
    keys.sort();
    assert_eq!(keys.len(), 10);
    assert_eq!(keys[0], "user:10");
    // SCAN visits every key once, with integer cursors.
    let mut seen: Vec<String> = c.scan_match("user:*").unwrap().collect();
    seen.sort();
    assert_eq!(seen.len(), 30);
    assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(33));
    assert_eq!(cmd(&mut c, &["RENAME", "user:00", "u0"]).unwrap(), Value::Okay);
    assert!(err(&mut c, &["RENAME", "user:00", "u0"]).contains("no such key"));
    assert_eq!(cmd(&mut c, &["RENAMENX", "u0", "user:01"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["COPY", "u0", "u1"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["COPY", "h2x", "h3", "DB", "1"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SELECT", "1"]).unwrap(), Value::Okay);
    assert_eq!(c.hget::<_, _, String>("h3", "f").unwrap(), "v");
    assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(1));
    assert!(err(&mut c, &["SELECT", "99"]).contains("DB index is out of range"));
    assert_eq!(cmd(&mut c, &["FLUSHDB"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["RANDOMKEY"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["SELECT", "0"]).unwrap(), Value::Okay);
    assert!(matches!(cmd(&mut c, &["RANDOMKEY"]).unwrap(), Value::BulkString(_)));
    assert_eq!(c.del::<_, i64>(&["u0", "u1", "nope"]).unwrap(), 2);
    assert_eq!(cmd(&mut c, &["UNLINK", "s"]).unwrap(), Value::Int(1));
    // The ordered-range extension.
    let got = cmd(&mut c, &["EPOCHDB.RANGE", "user:05", "user:08", "LIMIT", "2"]).unwrap();
    assert_eq!(got, Value::Array(vec![Value::BulkString(b"user:05".to_vec()), Value::BulkString(b"user:06".to_vec())]));
    let got = cmd(&mut c, &["EPOCHDB.RANGE", "user:", "", "REV", "LIMIT", "1", "WITHVALUES"]).unwrap();
    assert_eq!(got, Value::Array(vec![Value::BulkString(b"user:29".to_vec()), Value::BulkString(b"29".to_vec())]));
    let mut fields: Vec<(String, String)> = c.hscan("h2x").unwrap().collect();
    fields.sort();
    assert_eq!(fields, [("f".to_string(), "v".to_string())]);
    assert_eq!(cmd(&mut c, &["FLUSHALL"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(0));
}

/// MEMORY USAGE counts every row a key has (FORMAT.md, "Redis
/// keyspace"), each at `epochdb::row_footprint`; nil for a missing key.
#[test]
fn memory_usage_counts_each_row_of_a_key() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let row = |k: usize, v: usize| epochdb::row_footprint(k, v).unwrap() as i64;
    let usage = |c: &mut Connection, args: &[&str]| cmd_int(c, &[&["MEMORY", "USAGE"][..], args].concat());
    let _: () = c.set("s", "x".repeat(300)).unwrap();
    // The head: tag and key; type, expiry and the string.
    assert_eq!(usage(&mut c, &["s"]), row(2, 9 + 300));
    let _: () = c.expire("s", 100).unwrap();
    // The expiry index entry: tag, time and key.
    assert_eq!(usage(&mut c, &["s"]), row(2, 9 + 300) + row(10, 0));
    let _: () = c.hset_multiple("h", &[("f1", "a"), ("f22", "bb")]).unwrap();
    // Each field: tag, key length, key and field; its value.
    let fields = row(1 + 2 + 1 + 2, 1) + row(1 + 2 + 1 + 3, 2);
    assert_eq!(usage(&mut c, &["h"]), row(2, 9) + fields);
    assert_eq!(usage(&mut c, &["h", "SAMPLES", "0"]), row(2, 9) + fields);
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "nope"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["MEMORY", "USAGE", "h", "SAMPLES", "-1"]).contains("syntax error"));
    assert!(err(&mut c, &["MEMORY", "USAGE"]).contains("Try MEMORY HELP"));
    assert!(err(&mut c, &["MEMORY", "DOCTOR"]).contains("Try MEMORY HELP"));
    assert!(matches!(cmd(&mut c, &["MEMORY", "HELP"]).unwrap(), Value::Array(v) if v.len() == 2));
}

#[test]
fn keys_expire_lazily_and_by_the_sweep() {
    let server = start(Config::default());
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["SET", "a", "1", "PX", "150"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["SET", "b", "1", "EX", "100"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["SETEX", "c", "100", "1"]).unwrap(), Value::Okay);
    let ttl: i64 = c.ttl("b").unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(c.ttl::<_, i64>("nokey").unwrap(), -2);
    let _: () = c.set("plain", "x").unwrap();
    assert_eq!(c.ttl::<_, i64>("plain").unwrap(), -1);
    assert_eq!(cmd(&mut c, &["EXPIRE", "plain", "50", "XX"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["EXPIRE", "plain", "50", "NX"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["EXPIRE", "plain", "10", "GT"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["PERSIST", "plain"]).unwrap(), Value::Int(1));
    assert_eq!(c.ttl::<_, i64>("plain").unwrap(), -1);
    assert_eq!(cmd(&mut c, &["INCR", "b"]).unwrap(), Value::Int(2));
    assert!(c.ttl::<_, i64>("b").unwrap() > 0, "INCR keeps the TTL");
    let _: () = c.set("b", "3").unwrap();
    assert_eq!(c.ttl::<_, i64>("b").unwrap(), -1, "SET clears the TTL");
    assert_eq!(cmd(&mut c, &["SET", "c", "2", "KEEPTTL"]).unwrap(), Value::Okay);
    assert!(c.ttl::<_, i64>("c").unwrap() > 0);
    assert_eq!(cmd(&mut c, &["GETEX", "c", "PERSIST"]).unwrap(), Value::BulkString(b"2".to_vec()));
    assert_eq!(c.ttl::<_, i64>("c").unwrap(), -1);
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 1000;
    assert_eq!(cmd(&mut c, &["EXPIREAT", "c", &at.to_string()]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["EXPIRETIME", "c"]).unwrap(), Value::Int(at as i64));
    assert!(err(&mut c, &["SET", "x", "1", "EX", "0"]).contains("invalid expire time in 'set' command"));
    // A time that overflows is an error, whether the key exists or not,
    // and leaves the key as it was.
    let max = i64::MAX.to_string();
    assert!(err(&mut c, &["PEXPIRE", "c", &max]).contains("invalid expire time in 'pexpire' command"));
    assert!(err(&mut c, &["EXPIRE", "nokey", &max]).contains("invalid expire time in 'expire' command"));
    assert!(err(&mut c, &["EXPIREAT", "c", &max]).contains("invalid expire time in 'expireat' command"));
    assert_eq!(cmd(&mut c, &["EXPIRETIME", "c"]).unwrap(), Value::Int(at as i64));
    // A hash with a TTL, then expiry: reads see nothing at once.
    let _: () = c.hset("h", "f", "v").unwrap();
    assert_eq!(cmd(&mut c, &["PEXPIRE", "h", "100"]).unwrap(), Value::Int(1));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.get::<_, Option<String>>("a").unwrap(), None);
    assert_eq!(c.hlen::<_, i64>("h").unwrap(), 0);
    assert_eq!(c.exists::<_, i64>(&["a", "h"]).unwrap(), 0);
    // A write on an expired hash starts afresh (its old fields are gone).
    let _: () = c.hset("h", "g", "w").unwrap();
    assert_eq!(c.hkeys::<_, Vec<String>>("h").unwrap(), ["g"]);
    // The sweep removes expired keys nobody touches.
    for i in 0..500 {
        assert_eq!(cmd(&mut c, &["SET", &format!("t{i}"), "v", "PX", "50"]).unwrap(), Value::Okay);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
        let expired: u64 = info.lines().find_map(|l| l.strip_prefix("expired_keys:")).unwrap().trim().parse().unwrap();
        if expired >= 501 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the sweep removed only {expired} keys");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn multi_exec_is_one_transaction_and_watch_aborts_on_change() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let mut other = connect(&server);
    // A command's error inside EXEC is its reply; the others still run.
    let (got, _) = raw(&server, b"MULTI\r\nSET a 1\r\nINCR a\r\nHGET a f\r\nEXEC\r\nQUIT\r\n");
    let want = "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n+OK\r\n";
    assert_eq!(String::from_utf8_lossy(&got), want);
    // A queue-time error discards the block.
    assert_eq!(cmd(&mut c, &["MULTI"]).unwrap(), Value::Okay);
    assert!(err(&mut c, &["GET"]).contains("wrong number"));
    assert!(err(&mut c, &["EXEC"]).contains("Transaction discarded because of previous errors"));
    assert!(err(&mut c, &["EXEC"]).contains("EXEC without MULTI"));
    // WATCH: a change by another client makes EXEC return nil.
    assert_eq!(cmd(&mut c, &["WATCH", "a"]).unwrap(), Value::Okay);
    let _: () = other.set("a", "changed").unwrap();
    assert_eq!(cmd(&mut c, &["MULTI"]).unwrap(), Value::Okay);
    cmd(&mut c, &["SET", "a", "mine"]).unwrap();
    assert_eq!(cmd(&mut c, &["EXEC"]).unwrap(), Value::Nil);
    assert_eq!(c.get::<_, String>("a").unwrap(), "changed");
    // Unchanged: EXEC runs.
    assert_eq!(cmd(&mut c, &["WATCH", "a"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["MULTI"]).unwrap(), Value::Okay);
    cmd(&mut c, &["SET", "a", "mine"]).unwrap();
    assert_eq!(cmd(&mut c, &["EXEC"]).unwrap(), Value::Array(vec![Value::Okay]));
    assert!(err(&mut c, &["DISCARD"]).contains("DISCARD without MULTI"));
}

/// Transfers between accounts from many clients at once, each a
/// MULTI/EXEC of reads and writes (with WATCH and retries, as a client
/// would): the total never changes, and every snapshot read in one
/// transaction sees it whole.
#[test]
fn a_bank_keeps_its_total_under_concurrent_transactions() {
    const ACCOUNTS: usize = 8;
    let server = start(Config::default());
    let mut c = connect(&server);
    for i in 0..ACCOUNTS {
        let _: () = c.set(format!("acct{i}"), 100).unwrap();
    }
    let addr = server.local_addr();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/")).unwrap().get_connection().unwrap();
                let mut seed = t as u64 + 1;
                for _ in 0..150 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let (from, to) = (seed as usize % ACCOUNTS, (seed >> 8) as usize % ACCOUNTS);
                    if t % 3 == 0 {
                        // A reader: all balances in one transaction.
                        let keys: Vec<String> = (0..ACCOUNTS).map(|i| format!("acct{i}")).collect();
                        let (balances,): (Vec<i64>,) = redis::pipe().atomic().mget(&keys).query(&mut c).unwrap();
                        assert_eq!(balances.iter().sum::<i64>(), 100 * ACCOUNTS as i64, "{balances:?}");
                    } else {
                        // MULTI/EXEC with the read inside: DECRBY and INCRBY
                        // commit together or not at all.
                        let _: () = redis::pipe()
                            .atomic()
                            .decr(format!("acct{from}"), 7)
                            .incr(format!("acct{to}"), 7)
                            .query(&mut c)
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let total: i64 = (0..ACCOUNTS).map(|i| c.get::<_, i64>(format!("acct{i}")).unwrap()).sum();
    assert_eq!(total, 100 * ACCOUNTS as i64);
}

#[test]
fn pipelines_keep_order() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.set(format!("p{i}"), i).ignore();
        p.incr(format!("p{i}"), 1);
    }
    let got: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(got, (1..=1000).collect::<Vec<i64>>());
}

#[test]
fn passwords_and_acl_users_are_enforced() {
    let server = start(Config { requirepass: Some("secret".into()), ..Config::default() });
    let mut c = connect(&server);
    assert!(err(&mut c, &["GET", "k"]).contains("Authentication required"), "{}", err(&mut c, &["GET", "k"]));
    assert!(err(&mut c, &["AUTH", "wrong"]).contains("WRONGPASS"));
    assert_eq!(cmd(&mut c, &["AUTH", "secret"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["ACL", "SETUSER", "reader", "on", ">rpass", "+@read", "-keys"]).unwrap(), Value::Okay);
    let mut r = connect(&server);
    assert_eq!(cmd(&mut r, &["AUTH", "reader", "rpass"]).unwrap(), Value::Okay);
    assert_eq!(r.get::<_, String>("k").unwrap(), "v");
    assert!(err(&mut r, &["SET", "k", "x"]).contains("User reader has no permissions to run the 'set' command"));
    assert!(err(&mut r, &["KEYS", "*"]).contains("has no permissions"));
    assert!(err(&mut r, &["ACL", "WHOAMI"]).contains("has no permissions"));
    // Revoking applies to a connected client at its next command.
    assert_eq!(cmd(&mut c, &["ACL", "SETUSER", "reader", "-get"]).unwrap(), Value::Okay);
    assert!(err(&mut r, &["GET", "k"]).contains("has no permissions"));
    assert_eq!(cmd(&mut c, &["ACL", "DELUSER", "reader"]).unwrap(), Value::Int(1));
    assert!(err(&mut r, &["GET", "k"]).contains("Authentication required"));
    // HELLO 3 with AUTH: RESP3 replies.
    let mut h = connect(&server);
    let hello = cmd(&mut h, &["HELLO", "3", "AUTH", "default", "secret", "SETNAME", "me"]).unwrap();
    assert!(matches!(hello, Value::Map(_)), "{hello:?}");
    assert_eq!(cmd(&mut h, &["CLIENT", "GETNAME"]).unwrap(), Value::BulkString(b"me".to_vec()));
    assert_eq!(cmd(&mut h, &["GET", "nope"]).unwrap(), Value::Nil);
}

/// Raw bytes on a socket: what the server answers and whether it closes.
fn raw(server: &Server, send: &[u8]) -> (Vec<u8>, bool) {
    let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    s.write_all(send).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (got, closed)
}

#[test]
fn limits_answer_with_an_error_and_close() {
    let server = start(Config::default());
    let (got, closed) = raw(&server, b"*3000000\r\n");
    assert_eq!(got, b"-ERR Protocol error: invalid multibulk length\r\n");
    assert!(closed);
    let (got, closed) = raw(&server, b"*1\r\n$999999999999\r\n");
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
    let (got, closed) = raw(&server, &vec![b'x'; 70 * 1024]);
    assert_eq!(got, b"-ERR Protocol error: too big inline request\r\n");
    assert!(closed);
    // Inline commands, as typed into telnet, work.
    let (got, closed) = raw(&server, b"SET a \"x y\"\r\nGET a\r\nQUIT\r\n");
    assert_eq!(got, b"+OK\r\n$3\r\nx y\r\n+OK\r\n");
    assert!(closed);
    // Too many clients: the next one is told so.
    let small = start(Config { maxclients: 2, ..Config::default() });
    let _a = connect(&small);
    let _b = connect(&small);
    let (got, _) = raw(&small, b"PING\r\n");
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
}

/// The loop stops reading a socket after a short read and waits for the
/// next event: a request that arrives in pieces, and a client that sends
/// its last request and closes, are still answered whole.
#[test]
fn requests_split_across_writes_are_answered() {
    let server = start(Config::default());
    let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let value = "v".repeat(40_000); // more than one read's 16 KiB
    let set = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{value}\r\n", value.len());
    for piece in set.as_bytes().chunks(7_000) {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    // The last request and the close in one go.
    s.write_all(b"*2\r\n$6\r\nSTRLEN\r\n$1\r\nk\r\n").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got, b":40000\r\n");
}

#[test]
fn a_client_that_never_reads_does_not_stall_others() {
    let server = start(Config { threads: 1, ..Config::default() });
    let mut c = connect(&server);
    let _: () = c.set("big", "x".repeat(1 << 20)).unwrap();
    let rss = |c: &mut Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
        info.lines().find_map(|l| l.strip_prefix("used_memory_rss:")).unwrap().trim().parse().unwrap()
    };
    let before = rss(&mut c);
    // A client pipelines 300 GETs of 1 MiB and never reads the replies.
    let mut hog = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(300);
    hog.write_all(&req).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Others on the same event loop are still answered, and the server
    // holds at most about its 64 MiB output limit for the hog, not 300 MiB.
    for _ in 0..10 {
        assert_eq!(cmd(&mut c, &["PING"]).unwrap(), Value::SimpleString("PONG".into()));
    }
    let grew = rss(&mut c).saturating_sub(before) >> 20;
    assert!(grew < 200, "the server grew by {grew} MiB for a client that does not read");
    drop(hog);
}

#[test]
fn admin_commands_answer() {
    let server = start(Config::default());
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["PING"]).unwrap(), Value::SimpleString("PONG".into()));
    assert_eq!(cmd(&mut c, &["ECHO", "hi"]).unwrap(), Value::BulkString(b"hi".to_vec()));
    assert!(matches!(cmd(&mut c, &["TIME"]).unwrap(), Value::Array(v) if v.len() == 2));
    assert!(matches!(cmd(&mut c, &["CLIENT", "ID"]).unwrap(), Value::Int(_)));
    assert_eq!(cmd(&mut c, &["CLIENT", "SETNAME", "conn1"]).unwrap(), Value::Okay);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains("name=conn1"), "{list}");
    let info: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# Keyspace",
        "# Commandstats",
        "# Latencystats",
    ] {
        assert!(info.contains(section), "INFO lacks {section}");
    }
    // The fields redis-cli --stat and exporters read.
    for field in ["\r\nused_memory:", "\r\nconnected_clients:", "\r\ntotal_commands_processed:"] {
        assert!(info.contains(field), "INFO lacks {field:?}");
    }
    assert!(info.contains("cmdstat_client:calls="), "{info}");
    assert!(info.contains("latency_percentiles_usec_ping:p50="), "{info}");
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    assert!(count > 80);
    let docs = cmd(&mut c, &["COMMAND", "INFO", "get"]).unwrap();
    assert!(matches!(docs, Value::Array(ref v) if v.len() == 1), "{docs:?}");
    let keys = cmd(&mut c, &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]).unwrap();
    assert_eq!(keys, Value::Array(vec![Value::BulkString(b"a".to_vec()), Value::BulkString(b"b".to_vec())]));
    let cfg: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("appendfsync").query(&mut c).unwrap();
    assert_eq!(cfg, ["appendfsync", "everysec"]);
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap(), Value::Okay);
    cmd(&mut c, &["PING"]).unwrap();
    assert!(matches!(cmd(&mut c, &["SLOWLOG", "LEN"]).unwrap(), Value::Int(n) if n > 0));
    assert!(matches!(cmd(&mut c, &["SLOWLOG", "GET", "1"]).unwrap(), Value::Array(v) if v.len() == 1));
    assert_eq!(cmd(&mut c, &["SLOWLOG", "RESET"]).unwrap(), Value::Okay);
    assert!(
        matches!(cmd(&mut c, &["ROLE"]).unwrap(), Value::Array(v) if v[0] == Value::BulkString(b"master".to_vec()))
    );
    assert_eq!(cmd(&mut c, &["WAIT", "0", "0"]).unwrap(), Value::Int(0));
    assert!(err(&mut c, &["WAITAOF", "1", "0", "0"]).contains("appendonly is disabled"));
    assert_eq!(cmd(&mut c, &["RESET"]).unwrap(), Value::SimpleString("RESET".into()));
    assert!(err(&mut c, &["EPOCHDB.MEMBER", "REMOVE", "3"]).contains("not a node of a control plane"));
    // The members' command checks its arguments before it asks anyone.
    let members = Config {
        members: Some(epochdb_server::Members(std::sync::Arc::new(|id, addr| Err(format!("asked {id} {addr:?}"))))),
        ..Config::default()
    };
    let controlled = start(members);
    let mut m = connect(&controlled);
    for bad in
        [&["EPOCHDB.MEMBER", "ADD", "4"][..], &["EPOCHDB.MEMBER", "REMOVE", "x"], &["EPOCHDB.MEMBER", "DROP", "3"]]
    {
        assert!(err(&mut m, bad).contains("syntax"), "{bad:?}");
    }
    assert!(err(&mut m, &["EPOCHDB.MEMBER", "ADD", "4", "h:1"]).contains("asked 4 Some(\"h:1\")"));
    assert!(err(&mut m, &["EPOCHDB.MEMBER", "REMOVE", "3"]).contains("asked 3 None"));
    // Another client can be killed.
    let mut victim = connect(&server);
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut victim).unwrap();
    assert_eq!(cmd(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]).unwrap(), Value::Int(1));
    std::thread::sleep(Duration::from_millis(300));
    assert!(cmd(&mut victim, &["PING"]).is_err());
}

#[test]
fn durable_replies_survive_a_restart_and_waitaof_waits() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    let config = Config { appendfsync: AppendFsync::Always, options: options.clone(), ..Config::default() };
    let server = start(config.clone());
    let mut c = connect(&server);
    for i in 0..50 {
        // The write commits in an epoch at least the one before it was sent,
        // so by its reply that epoch must be durable.
        let before = server.database().epoch();
        let _: () = c.set(format!("d{i}"), i).unwrap();
        let durable = server.database().durable_epoch();
        assert!(durable >= before, "reply {i} came with epoch {before} not durable (pepoch {durable})");
    }
    assert_eq!(cmd(&mut c, &["WAITAOF", "1", "0", "0"]).unwrap(), Value::Array(vec![Value::Int(1), Value::Int(0)]));
    drop(c);
    server.shutdown();
    let server = start(config);
    let mut c = connect(&server);
    assert_eq!(c.get::<_, i64>("d49").unwrap(), 49);
    drop(c);
    server.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

/// WAIT counts the backups that acknowledged the client's last write,
/// blocks the client (its pipelined commands wait behind it) until enough
/// have or the timeout passes, and a replica refuses it.
#[test]
fn wait_counts_the_backups_that_acknowledged_the_last_write() {
    use epochdb::{Backup, BackupOptions, PrimaryOptions};
    use std::time::Instant;
    let base = std::env::temp_dir().join(format!("epochdb-serve-wait-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let primary = PrimaryOptions { listen: "127.0.0.1:0".parse().unwrap(), ..PrimaryOptions::default() };
    let options = Options {
        durability: Durability::Log,
        data_dir: Some(base.join("p")),
        primary: Some(primary),
        ..Options::default()
    };
    let server = start(Config { options, ..Config::default() });
    let listen = server.database().replication_status().expect("a primary").listen;
    let mut c = connect(&server);
    let _: () = c.set("k", "1").unwrap();
    let t = Instant::now();
    assert_eq!(cmd(&mut c, &["WAIT", "1", "150"]).unwrap(), Value::Int(0), "no backup yet");
    assert!(t.elapsed() >= Duration::from_millis(150), "WAIT gave up after {:?}", t.elapsed());
    // INFO counts a client blocked in WAIT while it waits.
    let blocked = |c: &mut Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
        info.lines().find_map(|l| l.strip_prefix("blocked_clients:")).unwrap().trim().parse().unwrap()
    };
    assert_eq!(blocked(&mut c), 0);
    let mut waiter = connect(&server);
    let waiting = std::thread::spawn(move || cmd(&mut waiter, &["WAIT", "1", "2000"]).unwrap());
    let deadline = Instant::now() + Duration::from_millis(1800);
    while blocked(&mut c) != 1 {
        assert!(Instant::now() < deadline, "INFO never counted the blocked client");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(waiting.join().unwrap(), Value::Int(0));
    // Its loop publishes the count once it has answered every waiter.
    let deadline = Instant::now() + Duration::from_secs(1);
    while blocked(&mut c) != 0 {
        assert!(Instant::now() < deadline, "the client is still counted after WAIT returned");
        std::thread::sleep(Duration::from_millis(5));
    }
    let backup = Backup::start(BackupOptions::new(base.join("b"), listen.to_string())).expect("a backup");
    let _: () = c.set("k", "2").unwrap();
    assert_eq!(cmd(&mut c, &["WAIT", "1", "0"]).unwrap(), Value::Int(1), "the backup acknowledges in time");
    let _: () = c.set("k", "2b").unwrap();
    let both = Value::Array(vec![Value::Int(1), Value::Int(1)]);
    assert_eq!(cmd(&mut c, &["WAITAOF", "1", "1", "0"]).unwrap(), both, "durable here and on the backup");
    // Blocked in WAIT, the client's next command waits behind it.
    let (wait, ping): (i64, String) = redis::pipe().cmd("WAIT").arg(2).arg(100).cmd("PING").query(&mut c).unwrap();
    assert_eq!((wait, &ping[..]), (1, "PONG"));
    // Its backup gone, a write is acknowledged by none.
    backup.stop().expect("stop the backup");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.database().replication_status().unwrap().backups.is_empty() {
        assert!(Instant::now() < deadline, "the primary never saw the backup go");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _: () = c.set("k", "3").unwrap();
    assert_eq!(cmd(&mut c, &["WAIT", "1", "50"]).unwrap(), Value::Int(0));
    let local_only = Value::Array(vec![Value::Int(1), Value::Int(0)]);
    assert_eq!(cmd(&mut c, &["WAITAOF", "1", "1", "50"]).unwrap(), local_only, "durable here, on no backup");
    assert!(err(&mut c, &["WAIT", "1", "-1"]).contains("timeout is negative"));
    drop(c);
    server.shutdown();
    std::fs::remove_dir_all(&base).ok();
}

/// Arbitrary bytes, and mutations of valid requests, never panic the
/// parser, never make it hold more than it was given, and a valid request
/// parses the same as the `redis` crate's reply parser reads it.
#[test]
fn the_parser_survives_arbitrary_bytes() {
    use epochdb_server::resp::{Args, Limits, Parser};
    let limits = Limits { max_bulk: 1 << 16, max_args: 1 << 10 };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let valid: &[&[u8]] = &[
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n",
        b"PING\r\n",
        b"SET \"a\\x41\" 'b'\r\n",
    ];
    for round in 0..20_000 {
        let mut input: Vec<u8> = if round % 2 == 0 {
            (0..next() % 64).map(|_| b"*$:\r\n0123456789-abc\"'\\ x"[(next() % 24) as usize]).collect()
        } else {
            let mut v = valid[(next() % valid.len() as u64) as usize].to_vec();
            for _ in 0..next() % 4 {
                let i = (next() % v.len() as u64) as usize;
                v[i] = next() as u8;
            }
            v
        };
        input.truncate(256);
        let (mut p, mut args) = (Parser::default(), Args::default());
        let mut pos = 0;
        while pos < input.len() {
            match p.parse(&input[pos..], &mut args, &limits) {
                Ok((0, _)) | Err(_) => break,
                Ok((used, _)) => {
                    let held: usize = (0..args.len()).map(|i| args.get(i).len()).sum();
                    assert!(held <= input.len(), "holds {held} bytes of {}", input.len());
                    pos += used;
                }
            }
        }
    }
    // The oracle: a request array is a RESP value the client parses too.
    for v in valid.iter().filter(|v| v[0] == b'*') {
        let (mut p, mut args) = (Parser::default(), Args::default());
        let (used, done) = p.parse(v, &mut args, &limits).unwrap();
        assert!(done && used == v.len());
        let Value::Array(items) = redis::parse_redis_value(v).unwrap() else { panic!() };
        let theirs: Vec<Vec<u8>> = items
            .into_iter()
            .map(|i| match i {
                Value::BulkString(b) => b,
                other => panic!("{other:?}"),
            })
            .collect();
        let ours: Vec<Vec<u8>> = (0..args.len()).map(|i| args.get(i).to_vec()).collect();
        assert_eq!(ours, theirs);
    }
}

/// BGSAVE begins a checkpoint at once, not at the end of the interval (an
/// hour here); LASTSAVE and INFO persistence show it. SAVE replies once a
/// checkpoint begun after it is installed. Without checkpoints both are
/// errors.
#[test]
fn bgsave_and_save_take_a_checkpoint_now() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-bgsave-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options {
        durability: Durability::LogAndCheckpoint,
        checkpoint: epochdb::CheckpointOptions { interval: Duration::from_secs(3600), ..Default::default() },
        data_dir: Some(dir.clone()),
        ..Options::default()
    };
    let server = start(Config { options, ..Config::default() });
    let mut c = connect(&server);
    let started: i64 = cmd_int(&mut c, &["LASTSAVE"]);
    let _: () = c.set("k", "v").unwrap();
    let checkpoints = |c: &mut Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        info.lines().find_map(|l| l.strip_prefix("epochdb_checkpoints:")).unwrap().trim().parse().unwrap()
    };
    assert_eq!(checkpoints(&mut c), 0);
    assert_eq!(cmd(&mut c, &["BGSAVE"]).unwrap(), Value::SimpleString("Background saving started".into()));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while checkpoints(&mut c) == 0 {
        assert!(std::time::Instant::now() < deadline, "no checkpoint after BGSAVE");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(cmd_int(&mut c, &["LASTSAVE"]) >= started);
    // SAVE replies once a checkpoint begun after it is installed (only
    // this client waits for it).
    let _: () = c.set("k2", "v2").unwrap();
    assert_eq!(cmd(&mut c, &["SAVE"]).unwrap(), Value::Okay);
    assert_eq!(checkpoints(&mut c), 2);
    assert_eq!(cmd(&mut c, &["SAVE"]).unwrap(), Value::Okay);
    assert_eq!(checkpoints(&mut c), 3);
    assert!(err(&mut c, &["SAVE", "NOW"]).contains("wrong number of arguments"));
    // The mode as --durability spells it.
    let mode: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("epochdb-durability").query(&mut c).unwrap();
    assert_eq!(mode, ["epochdb-durability", "log+checkpoint"]);
    assert!(err(&mut c, &["BGSAVE", "NOW"]).contains("syntax error"));
    drop(c);
    server.shutdown();
    std::fs::remove_dir_all(&dir).ok();
    let server = start(Config::default()); // durability off
    let mut c = connect(&server);
    assert!(err(&mut c, &["BGSAVE"]).contains("takes no checkpoints"));
    assert!(err(&mut c, &["SAVE"]).contains("takes no checkpoints"));
}

fn cmd_int(c: &mut Connection, args: &[&str]) -> i64 {
    match cmd(c, args).unwrap() {
        Value::Int(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// The next number of a xorshift sequence: a seeded, repeatable mix.
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// INFO keyspace's `db<n>:keys=<keys>,expires=<expires>` lines.
fn counted(c: &mut Connection) -> Vec<(usize, i64, i64)> {
    let info: String = redis::cmd("INFO").arg("keyspace").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let (db, rest) = l.strip_prefix("db")?.split_once(":keys=")?;
            let (keys, rest) = rest.split_once(",expires=")?;
            let expires = rest.split(',').next()?;
            Some((db.parse().ok()?, keys.parse().ok()?, expires.parse().ok()?))
        })
        .collect()
}

/// Each numbered database's heads and expiry entries, read from its
/// table: what INFO keyspace counts.
fn held(server: &Server) -> Vec<(usize, i64, i64)> {
    let d = server.database();
    let mut w = d.worker().unwrap();
    let mut all = Vec::new();
    for i in 0..16 {
        let t = d.table(&format!("redis.{i}")).unwrap();
        let mut n = [0i64; 2];
        for (j, (lo, hi)) in [(&b"k"[..], &b"l"[..]), (&b"x"[..], &b"y"[..])].into_iter().enumerate() {
            let range = (std::ops::Bound::Included(lo), std::ops::Bound::Excluded(hi));
            n[j] = w.run(|txn| txn.scan(t, range, usize::MAX, |_, _| true)).unwrap() as i64;
        }
        if n[0] > 0 {
            all.push((i, n[0], n[1]));
        }
    }
    all
}

/// INFO keyspace's counts, kept as writes commit, against the tables'
/// heads and expiry entries themselves: after a seeded mix of every
/// command that creates, removes or re-times keys (expired ones included,
/// in MULTI blocks, across databases), and after a restart.
#[test]
fn info_keyspace_counts_what_the_tables_hold() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-counts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    let config = Config { options, ..Config::default() };
    let server = start(config.clone());
    let mut c = connect(&server);
    // The base counted first, so that the mix is counted on top of it.
    let _: () = c.set("first", "v").unwrap();
    assert_eq!(counted(&mut c), vec![(0, 1, 0)]);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| xorshift(&mut seed) % n;
    for _ in 0..4000 {
        let k = format!("k{}", next(24));
        let k2 = format!("k{}", next(24));
        let db = next(3).to_string();
        let args: Vec<&str> = match next(30) {
            0 => vec!["SET", &k, "v"],
            1 => vec!["SET", &k, "v", "PX", "5"],
            2 => vec!["SET", &k, "v", "EX", "1000", "NX"],
            3 => vec!["SETEX", &k, "1000", "v"],
            4 => vec!["GETDEL", &k],
            5 => vec!["GETEX", &k, "PERSIST"],
            6 => vec!["MSET", &k, "1", &k2, "2"],
            7 => vec!["MSETNX", &k, "1", &k2, "2"],
            8 => vec!["INCR", &k],
            9 => vec!["APPEND", &k, "x"],
            10 => vec!["DEL", &k, &k2],
            11 => vec!["RENAME", &k, &k2],
            12 => vec!["RENAMENX", &k, &k2],
            13 => vec!["COPY", &k, &k2, "DB", &db, "REPLACE"],
            14 => vec!["PEXPIRE", &k, "3"],
            15 => vec!["EXPIREAT", &k, "1"], // in the past: gone at once
            16 => vec!["PERSIST", &k],
            17 => vec!["HSET", &k, "f", "1", "g", "2"],
            18 => vec!["HDEL", &k, "f", "g"],
            19 => vec!["HINCRBY", &k, "f", "1"],
            20 => vec!["SETRANGE", &k, "3", "x"],
            21 => vec!["SELECT", &db],
            22 if next(50) == 0 => vec!["FLUSHDB"],
            23 => vec!["HSETNX", &k, "f", "1"],
            24 => vec!["INCRBYFLOAT", &k, "1.5"],
            25 => vec!["UNLINK", &k],
            26 => vec!["PSETEX", &k, "4", "v"],
            27 => vec!["GETEX", &k, "PX", "5"],
            28 => vec!["EXPIRE", &k, "1000", "NX"],
            _ => vec!["GETSET", &k, "v"],
        };
        if next(8) == 0 {
            let (rk, rk2) = (format!("k{}", next(24)), format!("k{}", next(24)));
            let _: RedisResult<Value> = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(&rk)
                .arg("m")
                .arg("PX")
                .arg(4)
                .cmd("DEL")
                .arg(&rk2)
                .cmd("HSET")
                .arg(&rk2)
                .arg("f")
                .arg("v")
                .query(&mut c);
        }
        let _ = cmd(&mut c, &args); // WRONGTYPE and the like are replies, not failures
        if next(100) == 0 {
            std::thread::sleep(Duration::from_millis(6)); // let some expire
        }
    }
    // Every key with a short time is past it and swept by now.
    std::thread::sleep(Duration::from_millis(1500));
    let before = held(&server);
    assert!(before.iter().any(|&(_, _, e)| e > 0), "the mix left keys with a time: {before:?}");
    assert_eq!(counted(&mut c), before, "INFO keyspace against the tables");
    drop(c);
    server.shutdown();
    let server = start(config);
    let mut c = connect(&server);
    // Counted before the server took its first request.
    assert_eq!(counted(&mut c), before, "after a restart");
    let _: () = c.set("one-more", "v").unwrap();
    let after = held(&server);
    assert_eq!(counted(&mut c), after, "a write after the restart's count");
    // DBSIZE from the counts, and inside MULTI (a scan), agree with them.
    for &(db, keys, _) in &after {
        assert_eq!(cmd(&mut c, &["SELECT", &db.to_string()]).unwrap(), Value::Okay);
        assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(keys), "DBSIZE of db {db}");
        let (n,): (i64,) = redis::pipe().atomic().cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, keys, "DBSIZE of db {db} in MULTI");
    }
    drop(c);
    server.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

/// The counts under clients on both event loops writing the same few keys
/// at once: a command whose transaction aborts and is retried (or a MULTI
/// that WATCH fails) must count only what its committed try did.
#[test]
fn info_keyspace_counts_hold_under_concurrent_writers() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let _: () = c.set("first", "v").unwrap();
    assert_eq!(counted(&mut c), vec![(0, 1, 0)]);
    let url = format!("redis://{}/", server.local_addr());
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (w + 1);
                for _ in 0..3000 {
                    let seed = xorshift(&mut seed);
                    let (k, k2) = (format!("c{}", seed % 8), format!("c{}", (seed >> 8) % 8));
                    let _: RedisResult<Value> = match (seed >> 16) % 6 {
                        0 => redis::cmd("SET").arg(&k).arg("v").arg("EX").arg(1000).query(&mut c),
                        1 => redis::cmd("DEL").arg(&k).arg(&k2).query(&mut c),
                        2 => redis::cmd("RENAME").arg(&k).arg(&k2).query(&mut c),
                        3 => redis::cmd("HSET").arg(&k).arg("f").arg("v").query(&mut c),
                        4 => redis::pipe().atomic().set(&k, "m").del(&k2).persist(&k).query(&mut c),
                        _ => {
                            let _: RedisResult<Value> = redis::cmd("WATCH").arg(&k).query(&mut c);
                            redis::pipe().atomic().set(&k2, "w").expire(&k2, 1000).query(&mut c)
                        }
                    };
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let aborts: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    eprintln!("{}", aborts.lines().find(|l| l.contains("abort")).unwrap_or("no abort line"));
    let want = held(&server);
    assert_eq!(counted(&mut c), want, "INFO keyspace against the tables");
    drop(c);
    server.shutdown();
}

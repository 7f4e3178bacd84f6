//! The data types beyond strings and hashes, each against Redis's replies.

mod bits;
mod lists;
mod pubsub;
mod sets;
mod zsets;

use crate::{cmd, connect, start};
use epochdb::{Durability, Options};
use epochdb_server::Config;
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

/// Sets and lists are rows like any other: logged, checkpointed and
/// recovered.
#[test]
fn sets_and_lists_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-types-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options =
        Options { durability: Durability::LogAndCheckpoint, data_dir: Some(dir.clone()), ..Options::default() };
    let config = Config { options, ..Config::default() };
    let server = start(config.clone());
    let mut c = connect(&server);
    cmd(&mut c, &["SADD", "s", "a", "b", "c"]).unwrap();
    cmd(&mut c, &["SREM", "s", "b"]).unwrap();
    cmd(&mut c, &["RPUSH", "l", "1", "2", "3"]).unwrap();
    cmd(&mut c, &["LPOP", "l"]).unwrap();
    assert_eq!(cmd(&mut c, &["BGSAVE"]).unwrap(), Value::SimpleString("Background saving started".into()));
    cmd(&mut c, &["LPUSH", "l", "0"]).unwrap();
    drop(c);
    server.shutdown();
    let server = start(config);
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["SCARD", "s"]).unwrap(), Value::Int(2));
    assert_eq!(cmd(&mut c, &["SISMEMBER", "s", "b"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(), bulks(&["0", "2", "3"]));
    drop(c);
    server.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

/// DUMP and RESTORE carry any type, with its TTL as RESTORE gives it;
/// a damaged payload, a Redis one, or a key already there is refused.
#[test]
fn dump_and_restore_carry_every_type() {
    let server = start(Config::default());
    let mut c = connect(&server);
    cmd(&mut c, &["SET", "s", "v"]).unwrap();
    cmd(&mut c, &["HSET", "h", "f", "1", "g", "2"]).unwrap();
    cmd(&mut c, &["RPUSH", "l", "a", "b"]).unwrap();
    cmd(&mut c, &["SADD", "t", "x", "y"]).unwrap();
    cmd(&mut c, &["ZADD", "z", "1.5", "m"]).unwrap();
    for key in ["s", "h", "l", "t", "z"] {
        let Value::BulkString(payload) = cmd(&mut c, &["DUMP", key]).unwrap() else { panic!("DUMP {key}") };
        let copy = format!("{key}-copy");
        let mut restore = redis::cmd("RESTORE");
        restore.arg(&copy).arg(0).arg(&payload[..]);
        assert_eq!(restore.query::<Value>(&mut c).unwrap(), Value::Okay);
        assert_eq!(cmd(&mut c, &["TYPE", &copy]).unwrap(), cmd(&mut c, &["TYPE", key]).unwrap());
        let err = restore.query::<Value>(&mut c).unwrap_err().to_string();
        assert!(err.contains("Target key name already exists"), "{err}");
        let mut damaged = payload.clone();
        damaged[1] ^= 1;
        let err = redis::cmd("RESTORE").arg("x").arg(0).arg(damaged).query::<Value>(&mut c).unwrap_err().to_string();
        assert!(err.contains("DUMP payload version or checksum are wrong"), "{err}");
    }
    assert_eq!(cmd(&mut c, &["LRANGE", "l-copy", "0", "-1"]).unwrap(), bulks(&["a", "b"]));
    assert_eq!(cmd(&mut c, &["ZSCORE", "z-copy", "m"]).unwrap(), bulk("1.5"));
    assert_eq!(cmd(&mut c, &["HGET", "h-copy", "g"]).unwrap(), bulk("2"));
    let Value::BulkString(payload) = cmd(&mut c, &["DUMP", "s"]).unwrap() else { panic!() };
    let mut restore = redis::cmd("RESTORE");
    restore.arg("s").arg(100_000).arg(&payload[..]).arg("REPLACE");
    assert_eq!(restore.query::<Value>(&mut c).unwrap(), Value::Okay);
    assert!(matches!(cmd(&mut c, &["PTTL", "s"]).unwrap(), Value::Int(t) if t > 90_000));
    assert_eq!(cmd(&mut c, &["DUMP", "none"]).unwrap(), Value::Nil);
}

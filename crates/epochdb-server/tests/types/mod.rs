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

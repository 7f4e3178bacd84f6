use crate::{cmd, connect, err, start};
use epochdb_server::Config;
use redis::Value;
use std::collections::BTreeSet;

/// The members of a set reply, sorted.
fn members(v: Value) -> Vec<String> {
    let Value::Array(items) = v else { panic!("not an array: {v:?}") };
    let mut out: Vec<String> = items
        .into_iter()
        .map(|i| match i {
            Value::BulkString(b) => String::from_utf8(b).unwrap(),
            other => panic!("not a bulk string: {other:?}"),
        })
        .collect();
    out.sort();
    out
}

#[test]
fn sets_reply_as_in_redis() {
    let server = start(Config::default());
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["SADD", "s", "a", "b", "c", "a"]).unwrap(), Value::Int(3));
    assert_eq!(cmd(&mut c, &["SADD", "s", "c", "d"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SCARD", "s"]).unwrap(), Value::Int(4));
    assert_eq!(cmd(&mut c, &["SCARD", "none"]).unwrap(), Value::Int(0));
    assert_eq!(members(cmd(&mut c, &["SMEMBERS", "s"]).unwrap()), ["a", "b", "c", "d"]);
    assert_eq!(cmd(&mut c, &["SISMEMBER", "s", "b"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SISMEMBER", "s", "z"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["SMISMEMBER", "s", "a", "z"]).unwrap(), Value::Array(vec![Value::Int(1), Value::Int(0)]));
    assert_eq!(cmd(&mut c, &["SREM", "s", "a", "z"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["TYPE", "s"]).unwrap(), Value::SimpleString("set".into()));
    // The algebra, and its STORE forms over a key of another type.
    cmd(&mut c, &["SADD", "t", "c", "d", "e"]).unwrap();
    assert_eq!(members(cmd(&mut c, &["SINTER", "s", "t"]).unwrap()), ["c", "d"]);
    assert_eq!(members(cmd(&mut c, &["SUNION", "s", "t", "none"]).unwrap()), ["b", "c", "d", "e"]);
    assert_eq!(members(cmd(&mut c, &["SDIFF", "s", "t"]).unwrap()), ["b"]);
    assert_eq!(members(cmd(&mut c, &["SINTER", "s", "none"]).unwrap()), Vec::<String>::new());
    cmd(&mut c, &["SET", "str", "x"]).unwrap();
    assert_eq!(cmd(&mut c, &["SUNIONSTORE", "str", "s", "t"]).unwrap(), Value::Int(4));
    assert_eq!(cmd(&mut c, &["TYPE", "str"]).unwrap(), Value::SimpleString("set".into()));
    assert_eq!(cmd(&mut c, &["SINTERSTORE", "str", "s", "none"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["EXISTS", "str"]).unwrap(), Value::Int(0), "an empty result leaves no key");
    assert_eq!(cmd(&mut c, &["SDIFFSTORE", "d", "t", "s"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SINTERCARD", "2", "s", "t"]).unwrap(), Value::Int(2));
    assert_eq!(cmd(&mut c, &["SINTERCARD", "2", "s", "t", "LIMIT", "1"]).unwrap(), Value::Int(1));
    assert!(err(&mut c, &["SINTERCARD", "0", "s"]).contains("numkeys should be greater than 0"));
    assert!(err(&mut c, &["SINTERCARD", "3", "s", "t"]).contains("Number of keys can't be greater than number of args"));
    assert!(err(&mut c, &["SINTERCARD", "1", "s", "LIMIT", "-1"]).contains("LIMIT can't be negative"));
    // SMOVE, to a new set and within one.
    assert_eq!(cmd(&mut c, &["SMOVE", "s", "moved", "b"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SMOVE", "s", "moved", "b"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["SMOVE", "s", "s", "c"]).unwrap(), Value::Int(1));
    assert_eq!(members(cmd(&mut c, &["SMEMBERS", "moved"]).unwrap()), ["b"]);
    // Wrong types, on either side.
    cmd(&mut c, &["SET", "str", "x"]).unwrap();
    assert!(err(&mut c, &["SADD", "str", "a"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["SINTER", "s", "str"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["SMOVE", "s", "str", "c"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["GET", "s"]).contains("WRONGTYPE"));
    // A set renamed, copied, expired and persisted keeps its members and count.
    assert_eq!(cmd(&mut c, &["RENAME", "t", "t2"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["COPY", "t2", "t3"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["EXPIRE", "t3", "100"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["PERSIST", "t3"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SCARD", "t3"]).unwrap(), Value::Int(3));
    assert_eq!(members(cmd(&mut c, &["SMEMBERS", "t3"]).unwrap()), ["c", "d", "e"]);
    let mut scanned: Vec<String> = redis::Commands::sscan(&mut c, "t3").unwrap().collect();
    scanned.sort();
    assert_eq!(scanned, ["c", "d", "e"]);
    let Value::Array(page) = cmd(&mut c, &["SCAN", "0", "TYPE", "set", "COUNT", "100"]).unwrap() else { panic!() };
    assert_eq!(members(page[1].clone()), ["d", "moved", "s", "t2", "t3"]);
}

#[test]
fn spop_and_srandmember_pick_members() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let all: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "s"];
    args.extend(all.iter().map(String::as_str));
    cmd(&mut c, &args).unwrap();
    // A positive count: distinct members, at most the set's size.
    let got = members(cmd(&mut c, &["SRANDMEMBER", "s", "5"]).unwrap());
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 5);
    assert_eq!(members(cmd(&mut c, &["SRANDMEMBER", "s", "100"]).unwrap()).len(), 20);
    // A negative one: exactly that many, repeats allowed.
    assert_eq!(members(cmd(&mut c, &["SRANDMEMBER", "s", "-50"]).unwrap()).len(), 50);
    assert_eq!(cmd(&mut c, &["SRANDMEMBER", "none", "3"]).unwrap(), Value::Array(vec![]));
    assert_eq!(cmd(&mut c, &["SRANDMEMBER", "none"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["SPOP", "s", "-1"]).contains("value is out of range, must be positive"));
    assert!(err(&mut c, &["SRANDMEMBER", "s", "1", "2"]).contains("syntax error"));
    // SPOP takes what it returns, and all of it once empty.
    let mut popped: Vec<String> = members(cmd(&mut c, &["SPOP", "s", "7"]).unwrap());
    assert_eq!(cmd(&mut c, &["SCARD", "s"]).unwrap(), Value::Int(13));
    let Value::BulkString(one) = cmd(&mut c, &["SPOP", "s"]).unwrap() else { panic!() };
    popped.push(String::from_utf8(one).unwrap());
    popped.extend(members(cmd(&mut c, &["SPOP", "s", "100"]).unwrap()));
    popped.sort();
    let mut want = all.clone();
    want.sort();
    assert_eq!(popped, want);
    assert_eq!(cmd(&mut c, &["EXISTS", "s"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["SPOP", "s"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["SPOP", "s", "2"]).unwrap(), Value::Array(vec![]));
}

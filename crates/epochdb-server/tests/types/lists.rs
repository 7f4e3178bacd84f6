use super::{bulk, bulks};
use crate::{cmd, connect, err, start};
use epochdb_server::Config;
use redis::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn lists_reply_as_in_redis() {
    let server = start(Config::default());
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["RPUSH", "l", "a", "b", "c"]).unwrap(), Value::Int(3));
    assert_eq!(cmd(&mut c, &["LPUSH", "l", "y", "z"]).unwrap(), Value::Int(5));
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(), bulks(&["z", "y", "a", "b", "c"]));
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "-2", "100"]).unwrap(), bulks(&["b", "c"]));
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "3", "1"]).unwrap(), bulks(&[]));
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "-1"]).unwrap(), bulk("c"));
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "5"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["LLEN", "l"]).unwrap(), Value::Int(5));
    assert_eq!(cmd(&mut c, &["LSET", "l", "1", "Y"]).unwrap(), Value::Okay);
    assert!(err(&mut c, &["LSET", "l", "9", "x"]).contains("index out of range"));
    assert!(err(&mut c, &["LSET", "none", "0", "x"]).contains("no such key"));
    assert_eq!(cmd(&mut c, &["LINSERT", "l", "BEFORE", "a", "X"]).unwrap(), Value::Int(6));
    assert_eq!(cmd(&mut c, &["LINSERT", "l", "AFTER", "nope", "X"]).unwrap(), Value::Int(-1));
    assert_eq!(cmd(&mut c, &["LINSERT", "none", "AFTER", "a", "X"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(), bulks(&["z", "Y", "X", "a", "b", "c"]));
    cmd(&mut c, &["RPUSH", "l", "X", "X"]).unwrap();
    assert_eq!(cmd(&mut c, &["LREM", "l", "-1", "X"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["LPOS", "l", "X"]).unwrap(), Value::Int(2));
    assert_eq!(cmd(&mut c, &["LPOS", "l", "X", "RANK", "-1"]).unwrap(), Value::Int(6));
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "X", "COUNT", "0"]).unwrap(),
        Value::Array(vec![Value::Int(2), Value::Int(6)])
    );
    assert_eq!(cmd(&mut c, &["LPOS", "l", "X", "MAXLEN", "2"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["LPOS", "l", "X", "RANK", "0"]).contains("RANK can't be zero"));
    assert_eq!(cmd(&mut c, &["LREM", "l", "0", "X"]).unwrap(), Value::Int(2));
    assert_eq!(cmd(&mut c, &["LTRIM", "l", "1", "-2"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(), bulks(&["Y", "a", "b"]));
    assert_eq!(cmd(&mut c, &["LPOP", "l"]).unwrap(), bulk("Y"));
    assert_eq!(cmd(&mut c, &["RPOP", "l", "5"]).unwrap(), bulks(&["b", "a"]));
    assert_eq!(cmd(&mut c, &["EXISTS", "l"]).unwrap(), Value::Int(0), "an empty list is gone");
    assert_eq!(cmd(&mut c, &["LPOP", "l"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["LPOP", "l", "2"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["LPOP", "l", "-2"]).contains("value is out of range, must be positive"));
    assert_eq!(cmd(&mut c, &["LPUSHX", "l", "a"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["TYPE", "l"]).unwrap(), Value::SimpleString("none".into()));
    // LMOVE and RPOPLPUSH, between lists and within one.
    cmd(&mut c, &["RPUSH", "src", "1", "2", "3"]).unwrap();
    assert_eq!(cmd(&mut c, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]).unwrap(), bulk("1"));
    assert_eq!(cmd(&mut c, &["RPOPLPUSH", "src", "src"]).unwrap(), bulk("3"));
    assert_eq!(cmd(&mut c, &["LRANGE", "src", "0", "-1"]).unwrap(), bulks(&["3", "2"]));
    assert_eq!(cmd(&mut c, &["LMOVE", "none", "dst", "LEFT", "LEFT"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["LMOVE", "src", "dst", "UP", "LEFT"]).contains("syntax error"));
    // LMPOP takes from the first non-empty list.
    assert_eq!(
        cmd(&mut c, &["LMPOP", "2", "none", "src", "RIGHT", "COUNT", "5"]).unwrap(),
        Value::Array(vec![bulk("src"), bulks(&["2", "3"])])
    );
    assert_eq!(cmd(&mut c, &["LMPOP", "1", "none", "LEFT"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["LMPOP", "1", "dst", "LEFT", "COUNT", "0"]).contains("count should be greater than 0"));
    cmd(&mut c, &["SET", "str", "x"]).unwrap();
    assert!(err(&mut c, &["LPUSH", "str", "a"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["LMOVE", "dst", "str", "LEFT", "LEFT"]).contains("WRONGTYPE"));
    assert_eq!(cmd(&mut c, &["TYPE", "dst"]).unwrap(), Value::SimpleString("list".into()));
}

/// LINDEX, LSET and LRANGE seek to their position: on a long list grown
/// at both ends they read the right items.
#[test]
fn a_long_list_is_indexed_from_either_end() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let n = 20_000;
    for chunk in (0..n).collect::<Vec<i64>>().chunks(1000) {
        let mut right = redis::cmd("RPUSH");
        let mut left = redis::cmd("LPUSH");
        right.arg("l");
        left.arg("l");
        for i in chunk {
            right.arg(i);
            left.arg(-i - 1);
        }
        let _: i64 = right.query(&mut c).unwrap();
        let _: i64 = left.query(&mut c).unwrap();
    }
    // Items -n..n in order.
    assert_eq!(cmd(&mut c, &["LLEN", "l"]).unwrap(), Value::Int(2 * n));
    for i in [0, 1, n - 1, n, 2 * n - 1] {
        assert_eq!(cmd(&mut c, &["LINDEX", "l", &i.to_string()]).unwrap(), bulk(&(i - n).to_string()));
    }
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "-1"]).unwrap(), bulk(&(n - 1).to_string()));
    assert_eq!(cmd(&mut c, &["LSET", "l", &n.to_string(), "middle"]).unwrap(), Value::Okay);
    let from = (n - 1).to_string();
    let to = (n + 1).to_string();
    assert_eq!(cmd(&mut c, &["LRANGE", "l", &from, &to]).unwrap(), bulks(&["-1", "middle", "1"]));
}

/// A blocked client is answered by a push from another connection (which
/// may run on another event loop), times out with nil, and does not block
/// inside MULTI.
#[test]
fn blocking_pops_wait_for_a_push_or_time_out() {
    let server = start(Config::default());
    let mut c = connect(&server);
    let addr = server.local_addr();
    let pusher = std::thread::spawn(move || {
        let mut p = redis::Client::open(format!("redis://{addr}/")).unwrap().get_connection().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let _: i64 = redis::cmd("RPUSH").arg("q2").arg("hello").query(&mut p).unwrap();
    });
    let started = Instant::now();
    assert_eq!(cmd(&mut c, &["BLPOP", "q1", "q2", "5"]).unwrap(), bulks(&["q2", "hello"]));
    assert!(started.elapsed() < Duration::from_secs(4));
    pusher.join().unwrap();
    let started = Instant::now();
    assert_eq!(cmd(&mut c, &["BRPOP", "q1", "0.1"]).unwrap(), Value::Nil);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(cmd(&mut c, &["BLMOVE", "q1", "q3", "LEFT", "LEFT", "0.05"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["BLPOP", "q1", "-1"]).contains("timeout is negative"));
    assert!(err(&mut c, &["BLPOP", "q1", "x"]).contains("timeout is not a float or out of range"));
    cmd(&mut c, &["RPUSH", "q1", "a", "b"]).unwrap();
    assert_eq!(cmd(&mut c, &["BRPOPLPUSH", "q1", "q3", "0"]).unwrap(), bulk("b"));
    assert_eq!(
        cmd(&mut c, &["BLMPOP", "0", "2", "none", "q3", "LEFT"]).unwrap(),
        Value::Array(vec![bulk("q3"), bulks(&["b"])])
    );
    // CLIENT UNBLOCK ends a wait as a timeout, or with an error.
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    let addr = server.local_addr();
    for (how, want) in [("TIMEOUT", "nil"), ("ERROR", "client unblocked via CLIENT UNBLOCK")] {
        let unblocker = std::thread::spawn(move || {
            let mut u = redis::Client::open(format!("redis://{addr}/")).unwrap().get_connection().unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                let n: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).arg(how).query(&mut u).unwrap();
                if n == 1 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("the client never blocked");
        });
        match cmd(&mut c, &["BLPOP", "never", "0"]) {
            Ok(v) => assert_eq!((want, v), ("nil", Value::Nil)),
            Err(e) => assert!(e.to_string().contains(want), "{e}"),
        }
        unblocker.join().unwrap();
    }
    let mut pipe = redis::pipe();
    pipe.cmd("MULTI").cmd("BLPOP").arg("none").arg("0").cmd("BLMOVE").arg("none").arg("x").arg("LEFT").arg("LEFT");
    pipe.arg("0").cmd("EXEC");
    let got: Vec<Value> = pipe.query(&mut c).unwrap();
    assert_eq!(got.last().unwrap(), &Value::Array(vec![Value::Nil, Value::Nil]));
}

/// A queue under concurrent producers and consumers: every item pushed is
/// popped exactly once.
#[test]
fn a_queue_loses_and_repeats_nothing_under_concurrent_clients() {
    let server = start(Config::default());
    let addr = server.local_addr();
    let (producers, per) = (3, 300);
    let done = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for p in 0..producers {
        let done = done.clone();
        threads.push(std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://{addr}/")).unwrap().get_connection().unwrap();
            for i in 0..per {
                let _: i64 = redis::cmd("RPUSH").arg("queue").arg(format!("{p}:{i}")).query(&mut c).unwrap();
            }
            done.fetch_add(1, Ordering::SeqCst);
            Vec::new()
        }));
    }
    for _ in 0..2 {
        let done = done.clone();
        threads.push(std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://{addr}/")).unwrap().get_connection().unwrap();
            let mut got = Vec::new();
            loop {
                // Every producer finished before a wait that found nothing.
                let finished = done.load(Ordering::SeqCst) == producers;
                let v: Option<(String, String)> = redis::cmd("BLPOP").arg("queue").arg("0.2").query(&mut c).unwrap();
                match v {
                    Some((_, item)) => got.push(item),
                    None if finished => return got,
                    None => {}
                }
            }
        }));
    }
    let mut all: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    all.sort();
    let mut want: Vec<String> = (0..producers).flat_map(|p| (0..per).map(move |i| format!("{p}:{i}"))).collect();
    want.sort();
    assert_eq!(all, want);
}

use super::{bulk, bulks};
use crate::{cmd, connect, err, start};
use epochdb_server::Config;
use redis::Value;

#[test]
fn sorted_sets_reply_as_in_redis() {
    let server = start(Config::default());
    let mut c = connect(&server);
    // Scores are replied as redis-server 7.0 replies them (%.17g).
    assert_eq!(cmd(&mut c, &["ZADD", "z", "0.1", "a", "1.5", "b", "3", "c", "-inf", "d"]).unwrap(), Value::Int(4));
    assert_eq!(cmd(&mut c, &["ZSCORE", "z", "a"]).unwrap(), bulk("0.10000000000000001"));
    assert_eq!(
        cmd(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]).unwrap(),
        bulks(&["d", "-inf", "a", "0.10000000000000001", "b", "1.5", "c", "3"])
    );
    assert_eq!(cmd(&mut c, &["ZINCRBY", "z", "0.2", "a"]).unwrap(), bulk("0.30000000000000004"));
    assert_eq!(cmd(&mut c, &["ZADD", "z", "XX", "CH", "5", "c", "9", "new"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["ZADD", "z", "GT", "1", "c"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["ZADD", "z", "NX", "INCR", "1", "c"]).unwrap(), Value::Nil);
    assert!(err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]).contains("XX and NX options at the same time"));
    assert!(err(&mut c, &["ZADD", "z", "GT", "LT", "1", "a"]).contains("GT, LT, and/or NX options"));
    assert!(err(&mut c, &["ZADD", "z", "nan", "a"]).contains("not a valid float"));
    assert_eq!(cmd(&mut c, &["ZCARD", "z"]).unwrap(), Value::Int(4));
    assert_eq!(cmd(&mut c, &["ZRANK", "z", "c"]).unwrap(), Value::Int(3));
    assert_eq!(cmd(&mut c, &["ZREVRANK", "z", "c"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["ZRANK", "z", "none"]).unwrap(), Value::Nil);
    // Ranges by score (exclusive ends, infinities, LIMIT, REV) and by lex.
    assert_eq!(cmd(&mut c, &["ZRANGEBYSCORE", "z", "(0.30000000000000004", "+inf"]).unwrap(), bulks(&["b", "c"]));
    assert_eq!(cmd(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"]).unwrap(), bulks(&["a", "b"]));
    assert_eq!(cmd(&mut c, &["ZRANGE", "z", "5", "(1.5", "BYSCORE", "REV"]).unwrap(), bulks(&["c"]));
    assert_eq!(cmd(&mut c, &["ZCOUNT", "z", "-inf", "1.5"]).unwrap(), Value::Int(3));
    assert!(err(&mut c, &["ZRANGEBYSCORE", "z", "x", "1"]).contains("min or max is not a float"));
    cmd(&mut c, &["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d"]).unwrap();
    assert_eq!(cmd(&mut c, &["ZRANGEBYLEX", "lex", "(a", "[c"]).unwrap(), bulks(&["b", "c"]));
    assert_eq!(cmd(&mut c, &["ZREVRANGEBYLEX", "lex", "+", "-", "LIMIT", "0", "2"]).unwrap(), bulks(&["d", "c"]));
    assert_eq!(cmd(&mut c, &["ZLEXCOUNT", "lex", "-", "(c"]).unwrap(), Value::Int(2));
    assert!(err(&mut c, &["ZRANGEBYLEX", "lex", "a", "c"]).contains("not valid string range item"));
    assert_eq!(cmd(&mut c, &["ZREMRANGEBYLEX", "lex", "[b", "[c"]).unwrap(), Value::Int(2));
    // Pops, the algebra, STORE forms.
    assert_eq!(cmd(&mut c, &["ZPOPMIN", "z"]).unwrap(), bulks(&["d", "-inf"]));
    assert_eq!(cmd(&mut c, &["ZPOPMAX", "z", "2"]).unwrap(), bulks(&["c", "5", "b", "1.5"]));
    assert!(err(&mut c, &["ZPOPMIN", "z", "-1"]).contains("value is out of range, must be positive"));
    assert_eq!(
        cmd(&mut c, &["ZMPOP", "2", "none", "z", "MIN"]).unwrap(),
        Value::Array(vec![bulk("z"), Value::Array(vec![bulks(&["a", "0.30000000000000004"])])])
    );
    assert_eq!(cmd(&mut c, &["EXISTS", "z"]).unwrap(), Value::Int(0), "an empty sorted set is gone");
    cmd(&mut c, &["ZADD", "z1", "1", "a", "2", "b"]).unwrap();
    cmd(&mut c, &["ZADD", "z2", "10", "b", "20", "c"]).unwrap();
    cmd(&mut c, &["SADD", "s", "c", "d"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["ZUNION", "3", "z1", "z2", "s", "WEIGHTS", "1", "2", "3", "WITHSCORES"]).unwrap(),
        bulks(&["a", "1", "d", "3", "b", "22", "c", "43"])
    );
    assert_eq!(
        cmd(&mut c, &["ZINTER", "2", "z1", "z2", "AGGREGATE", "MAX", "WITHSCORES"]).unwrap(),
        bulks(&["b", "10"])
    );
    assert_eq!(cmd(&mut c, &["ZDIFF", "2", "z1", "z2"]).unwrap(), bulks(&["a"]));
    assert_eq!(cmd(&mut c, &["ZINTERSTORE", "out", "2", "z1", "z2"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["ZRANGE", "out", "0", "-1", "WITHSCORES"]).unwrap(), bulks(&["b", "12"]));
    assert_eq!(cmd(&mut c, &["ZRANGESTORE", "top", "z2", "0", "0", "REV"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["ZRANGE", "top", "0", "-1"]).unwrap(), bulks(&["c"]));
    assert_eq!(cmd(&mut c, &["ZINTERCARD", "2", "z1", "z2"]).unwrap(), Value::Int(1));
    assert!(err(&mut c, &["ZUNIONSTORE", "out", "0", "z1"]).contains("at least 1 input key is needed"));
    cmd(&mut c, &["SET", "str", "x"]).unwrap();
    assert!(err(&mut c, &["ZADD", "str", "1", "a"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["ZUNION", "2", "z1", "str"]).contains("WRONGTYPE"));
    assert_eq!(cmd(&mut c, &["TYPE", "z1"]).unwrap(), Value::SimpleString("zset".into()));
    // Renamed and copied, a sorted set keeps its members and order.
    assert_eq!(cmd(&mut c, &["RENAME", "z2", "z3"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["COPY", "z3", "z4"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["ZRANGE", "z4", "0", "-1", "WITHSCORES"]).unwrap(), bulks(&["b", "10", "c", "20"]));
    let mut scanned: Vec<(String, f64)> = redis::Commands::zscan(&mut c, "z4").unwrap().collect();
    scanned.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(scanned, [("b".to_string(), 10.0), ("c".to_string(), 20.0)]);
}

/// A leaderboard under concurrent clients, each moving points from one
/// member to another in MULTI/EXEC: the scores' sum holds.
#[test]
fn a_leaderboard_keeps_its_sum_under_concurrent_transactions() {
    let server = start(Config::default());
    let addr = server.local_addr();
    let mut c = connect(&server);
    let players = 8;
    for p in 0..players {
        cmd(&mut c, &["ZADD", "board", "100", &format!("p{p}")]).unwrap();
    }
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/")).unwrap().get_connection().unwrap();
                let mut seed = t + 1;
                for _ in 0..200 {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let (from, to) = ((seed >> 33) % players, (seed >> 40) % players);
                    let points = (seed >> 50) % 10;
                    let _: Vec<f64> = redis::pipe()
                        .atomic()
                        .cmd("ZINCRBY")
                        .arg("board")
                        .arg(-(points as f64))
                        .arg(format!("p{from}"))
                        .cmd("ZINCRBY")
                        .arg("board")
                        .arg(points as f64)
                        .arg(format!("p{to}"))
                        .query(&mut c)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let scores: Vec<(String, f64)> =
        redis::cmd("ZRANGE").arg("board").arg(0).arg(-1).arg("WITHSCORES").query(&mut c).unwrap();
    assert_eq!(scores.len(), players as usize);
    assert_eq!(scores.iter().map(|(_, s)| s).sum::<f64>(), 100.0 * players as f64);
    assert!(scores.windows(2).all(|w| w[0].1 <= w[1].1), "in score order: {scores:?}");
}

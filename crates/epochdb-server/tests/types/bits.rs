use super::bulk;
use crate::{cmd, connect, err, start};
use epochdb_server::Config;
use redis::Value;

/// The replies redis-server 7.0 gives to the same commands.
#[test]
fn bits_and_lcs_reply_as_in_redis() {
    let server = start(Config::default());
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["SETBIT", "b", "7", "1"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["SETBIT", "b", "7", "0"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["SETBIT", "b", "100", "1"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["GETBIT", "b", "100"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["STRLEN", "b"]).unwrap(), Value::Int(13));
    assert!(err(&mut c, &["SETBIT", "b", "1", "2"]).contains("bit is not an integer or out of range"));
    assert!(err(&mut c, &["SETBIT", "b", "-1", "1"]).contains("bit offset is not an integer or out of range"));
    cmd(&mut c, &["SET", "s", "foobar"]).unwrap();
    assert_eq!(cmd(&mut c, &["BITCOUNT", "s"]).unwrap(), Value::Int(26));
    assert_eq!(cmd(&mut c, &["BITCOUNT", "s", "1", "1"]).unwrap(), Value::Int(6));
    assert_eq!(cmd(&mut c, &["BITCOUNT", "s", "5", "30", "BIT"]).unwrap(), Value::Int(17));
    assert_eq!(cmd(&mut c, &["BITPOS", "s", "1"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["BITPOS", "s", "0", "2", "-1", "BIT"]).unwrap(), Value::Int(3));
    assert_eq!(cmd(&mut c, &["BITPOS", "none", "0"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["BITPOS", "none", "1"]).unwrap(), Value::Int(-1));
    cmd(&mut c, &["SET", "x1", "abc"]).unwrap();
    cmd(&mut c, &["SET", "x2", "ab"]).unwrap();
    assert_eq!(cmd(&mut c, &["BITOP", "AND", "d", "x1", "x2"]).unwrap(), Value::Int(3));
    assert_eq!(cmd(&mut c, &["GET", "d"]).unwrap(), Value::BulkString(b"ab\0".to_vec()));
    assert!(
        err(&mut c, &["BITOP", "NOT", "n", "x1", "x2"]).contains("BITOP NOT must be called with a single source key")
    );
    let got = cmd(
        &mut c,
        &[
            "BITFIELD", "bf", "SET", "i8", "0", "100", "INCRBY", "i8", "0", "100", "GET", "u4", "0", "OVERFLOW", "SAT",
            "INCRBY", "i8", "0", "100", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "100", "GET", "i8", "#0",
        ],
    )
    .unwrap();
    let want = [Value::Int(0), Value::Int(-56), Value::Int(12), Value::Int(44), Value::Nil, Value::Int(44)];
    assert_eq!(got, Value::Array(want.to_vec()));
    assert!(err(&mut c, &["BITFIELD", "bf", "GET", "u64", "0"]).contains("Invalid bitfield type"));
    assert!(err(&mut c, &["BITFIELD_RO", "bf", "SET", "u8", "0", "1"]).contains("only supports the GET subcommand"));
    cmd(&mut c, &["SET", "k1", "ohmytext"]).unwrap();
    cmd(&mut c, &["SET", "k2", "mynewtext"]).unwrap();
    assert_eq!(cmd(&mut c, &["LCS", "k1", "k2"]).unwrap(), bulk("mytext"));
    assert_eq!(cmd(&mut c, &["LCS", "k1", "k2", "LEN"]).unwrap(), Value::Int(6));
    let ints = |v: &[i64]| Value::Array(v.iter().map(|&n| Value::Int(n)).collect());
    assert_eq!(
        cmd(&mut c, &["LCS", "k1", "k2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]).unwrap(),
        Value::Array(vec![
            bulk("matches"),
            Value::Array(vec![Value::Array(vec![ints(&[4, 7]), ints(&[5, 8]), Value::Int(4)])]),
            bulk("len"),
            Value::Int(6),
        ])
    );
}

use crate::{cmd, connect, start};
use epochdb_server::Config;
use redis::Value;
use std::time::Duration;

/// Messages reach channel and pattern subscribers on every event loop;
/// a RESP2 subscriber may only manage its subscriptions.
#[test]
fn published_messages_reach_every_subscriber() {
    let server = start(Config::default());
    let url = format!("redis://{}/", server.local_addr());
    let client = redis::Client::open(url).unwrap();
    // Several subscribers, so that both event loops have some.
    let mut conns: Vec<redis::Connection> = (0..4).map(|_| client.get_connection().unwrap()).collect();
    // A PubSub ends its subscriptions when dropped: keep them all.
    let mut subs: Vec<redis::PubSub<'_>> = conns
        .iter_mut()
        .enumerate()
        .map(|(i, s)| {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut p = s.as_pubsub();
            if i % 2 == 0 {
                p.subscribe("news").unwrap();
            } else {
                p.psubscribe("n*").unwrap();
            }
            p
        })
        .collect();
    let mut c = connect(&server);
    let numsub = cmd(&mut c, &["PUBSUB", "NUMSUB", "news", "other"]).unwrap();
    assert_eq!(
        numsub,
        Value::Array(vec![
            Value::BulkString(b"news".to_vec()),
            Value::Int(2),
            Value::BulkString(b"other".to_vec()),
            Value::Int(0)
        ])
    );
    assert_eq!(cmd(&mut c, &["PUBSUB", "NUMPAT"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["PUBLISH", "news", "hello"]).unwrap(), Value::Int(4));
    for (i, s) in subs.iter_mut().enumerate() {
        let msg = s.get_message().unwrap();
        assert_eq!(msg.get_channel_name(), "news");
        assert_eq!(msg.get_payload::<String>().unwrap(), "hello");
        assert_eq!(msg.from_pattern(), i % 2 == 1);
    }
    assert_eq!(cmd(&mut c, &["PUBLISH", "other", "x"]).unwrap(), Value::Int(0));
}

/// A RESP2 client with subscriptions is refused other commands, answers
/// PING as Redis does there, and RESET ends its subscriptions.
#[test]
fn a_subscribed_client_may_only_manage_its_subscriptions() {
    let server = start(Config::default());
    let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |s: &mut std::net::TcpStream, req: &[u8], want: &[u8]| {
        use std::io::{Read, Write};
        s.write_all(req).unwrap();
        let mut got = vec![0; want.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    };
    ask(
        &mut s,
        b"SUBSCRIBE a b\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
    );
    ask(&mut s, b"GET k\r\n", b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n");
    ask(&mut s, b"PING\r\n", b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    ask(&mut s, b"UNSUBSCRIBE a\r\n", b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n");
    ask(&mut s, b"RESET\r\n", b"+RESET\r\n");
    ask(&mut s, b"PING\r\n", b"+PONG\r\n");
    let mut c = connect(&server);
    assert_eq!(cmd(&mut c, &["PUBSUB", "CHANNELS"]).unwrap(), Value::Array(vec![]));
}

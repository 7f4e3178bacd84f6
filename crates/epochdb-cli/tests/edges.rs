//! Where a user's ordinary sequence of commands meets the defaults of
//! `serve` and `bench`, run as the real binary: nothing deleted that the
//! command did not make, nobody let in that Redis would keep out, no memory
//! held for a half-sent value, cursors any connection may continue,
//! settings that take effect or say why, and an idle server that writes
//! nothing.

mod common;

use common::{serve_in, serve_printing, Scratch, Served};
use redis::{Connection, RedisResult, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A short durable YCSB bench run in `cwd`, with more arguments.
fn bench(cwd: &Path, more: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .current_dir(cwd)
        .args(["bench", "ycsb", "--keys", "1000", "--duration", "0.5", "--warmup", "0", "--threads", "1"])
        .args(["--quiet", "--durability", "log"])
        .args(more)
        .output()
        .expect("run epochdb bench")
}

fn cmd(c: &mut Connection, args: &[&str]) -> RedisResult<Value> {
    let mut r = redis::cmd(args[0]);
    for a in &args[1..] {
        r.arg(*a);
    }
    r.query(c)
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

/// `bench` on a directory that holds a database refuses, naming the
/// directory, what it holds and the flag that allows it; the database is
/// untouched, and `--overwrite` replaces it.
#[test]
fn a_bench_refuses_a_database_it_did_not_make() {
    let dir = Scratch::new("edges-bench-refuses");
    let server = serve_in(&dir, &["--data-dir", "db", "--durability", "log"]);
    let _: () = redis::cmd("SET").arg("important").arg("x").query(&mut server.connect()).unwrap();
    server.shutdown();

    let out = bench(&dir, &["--data-dir", "db"]);
    assert!(!out.status.success(), "the bench ran on a stopped database: {}", text(&out));
    let said = text(&out);
    assert!(said.contains("db") && said.contains("redis.0") && said.contains("--overwrite"), "{said}");

    let server = serve_in(&dir, &["--data-dir", "db", "--durability", "log"]);
    assert_eq!(get(&mut server.connect(), "important").as_deref(), Some("x"), "{}", server.log());
    server.shutdown();

    let out = bench(&dir, &["--data-dir", "db", "--overwrite"]);
    assert!(out.status.success(), "--overwrite: {}", text(&out));
    // A bench's own directory, from an earlier run, needs the flag too.
    let out = bench(&dir, &["--data-dir", "db"]);
    assert!(!out.status.success() && text(&out).contains("usertable"), "{}", text(&out));
}

/// The README's order, quick start and then serve, in one directory: the
/// two keep to their own default directories, and `serve` on a directory
/// with other tables says so at start.
#[test]
fn serve_and_bench_keep_to_their_own_default_directories() {
    let dir = Scratch::new("edges-defaults");
    let server = serve_in(&dir, &[]);
    let _: () = redis::cmd("SET").arg("important").arg("x").query(&mut server.connect()).unwrap();
    server.shutdown();
    let out = bench(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let server = serve_in(&dir, &[]);
    let mut c = server.connect();
    assert_eq!(get(&mut c, "important").as_deref(), Some("x"), "{}", server.log());
    assert!(!server.log().contains("usertable"), "{}", server.log());
    server.shutdown();

    let bench_dir = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("manifest").is_file() && !p.ends_with("epochdb-data"))
        .expect("the bench's own directory");
    let server = serve_in(&dir, &["--data-dir", bench_dir.to_str().unwrap()]);
    logged(&server, "usertable");
    server.shutdown();
}

/// Waits until the server's log says `what` (it may follow the reply).
fn logged(server: &Served, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains(what) {
        assert!(Instant::now() < deadline, "not logged, {what:?}: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `ip` as the test needs it; panics with what it said.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {args:?}: {}", text(&out));
}

/// A network namespace with a veth pair to this one: a client there
/// connects from an address that is not loopback. Removed on drop.
struct Netns {
    name: String,
    /// This side's address, which the namespace reaches.
    host: String,
}

impl Netns {
    /// `None` when this process may not make one (not root).
    fn new() -> Option<Netns> {
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let n = std::process::id() % 60_000;
        let (name, outer, inner) = (format!("edb-edges-{n}"), format!("edbo{n}"), format!("edbi{n}"));
        let net = format!("10.{}.{}", 200 + n / 10_000 % 50, n % 250);
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = Netns { name: name.clone(), host: format!("{net}.1") };
        ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", &name]);
        ip(&["addr", "add", &format!("{net}.1/24"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        ip(&["-n", &name, "addr", "add", &format!("{net}.2/24"), "dev", &inner]);
        ip(&["-n", &name, "link", "set", &inner, "up"]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Some(ns)
    }

    /// Runs `f` on a thread that lives in the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(format!("/var/run/netns/{}", self.name)).expect("the namespace");
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns(2) on a namespace file we hold open; it
                // moves only this thread.
                assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns");
                f()
            })
            .join()
            .unwrap()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// Sends `request` on a new connection to `addr` and returns what came
/// back before the server closed it (or 2 s passed).
fn exchange(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Bound beyond loopback with no password, the server refuses clients
/// from other addresses with Redis's DENIED reply and logs it; loopback
/// clients, a password, or `--protected-mode no` let them in.
#[test]
fn protected_mode_refuses_other_addresses_without_a_password() {
    let Some(ns) = Netns::new() else {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root: it must run this test");
        eprintln!("protected mode: not run, a network namespace needs root");
        return;
    };
    let dir = Scratch::new("edges-protected");
    let set = b"*3\r\n$3\r\nSET\r\n$4\r\nfrom\r\n$5\r\nthere\r\n";
    let server = serve_in(&dir, &["--bind", "0.0.0.0", "--durability", "off"]);
    let there = format!("{}:{}", ns.host, server.port);
    let reply = ns.run(|| exchange(&there, set));
    assert!(reply.starts_with("-DENIED") && reply.contains("protected mode"), "{reply:?}");
    let mut c = server.connect();
    assert_eq!(get(&mut c, "from"), None, "a denied client wrote");
    logged(&server, "protected mode");
    // CONFIG SET protected-mode no, from loopback, lets them in.
    let _: () = redis::cmd("CONFIG").arg("SET").arg("protected-mode").arg("no").query(&mut c).unwrap();
    assert!(ns.run(|| exchange(&there, set)).starts_with("+OK"));
    drop(server);

    let server = serve_in(&dir, &["--bind", "0.0.0.0", "--durability", "off", "--protected-mode", "no"]);
    let there = format!("{}:{}", ns.host, server.port);
    assert!(ns.run(|| exchange(&there, set)).starts_with("+OK"));
    drop(server);

    let server = serve_in(&dir, &["--bind", "0.0.0.0", "--durability", "off", "--requirepass", "pw"]);
    let there = format!("{}:{}", ns.host, server.port);
    let auth = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n";
    assert!(ns.run(|| exchange(&there, &[&auth[..], &set[..]].concat())).starts_with("+OK\r\n+OK"));
}

/// An HTTP request is closed at its `POST` or `Host:` line, unanswered
/// and logged, so its body never runs as a command.
#[test]
fn http_requests_are_closed_before_their_body_runs() {
    let dir = Scratch::new("edges-xproto");
    let server = serve_in(&dir, &["--durability", "off"]);
    let addr = format!("127.0.0.1:{}", server.port);
    let post = "POST / HTTP/1.1\r\nContent-Length: 18\r\n\r\nSET xproto pwned\r\n";
    assert_eq!(exchange(&addr, post.as_bytes()), "", "an HTTP POST was answered");
    let get_then_host = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\nSET xproto2 pwned\r\n";
    let reply = exchange(&addr, get_then_host.as_bytes());
    assert!(!reply.contains("+OK"), "{reply:?}");
    let mut c = server.connect();
    assert_eq!(get(&mut c, "xproto"), None);
    assert_eq!(get(&mut c, "xproto2"), None);
    logged(&server, "SECURITY ATTACK");
}

/// The resident size of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() << 10
}

/// Waits until `pid`'s resident size stops moving (no change over 300 ms).
fn settled_rss(pid: u32) -> u64 {
    let mut last = rss(pid);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(300));
        let now = rss(pid);
        if now.abs_diff(last) < 2 << 20 {
            return now;
        }
        last = now;
    }
    last
}

/// A client that declares a 512 MiB value and sends half of it makes the
/// server hold about what arrived, not a multiple, and the memory goes
/// back once it disconnects; `client-query-buffer-limit` closes it.
#[test]
fn a_half_sent_value_holds_only_what_arrived() {
    const SENT: usize = 256 << 20;
    let dir = Scratch::new("edges-half-sent");
    let server = serve_in(&dir, &["--durability", "off", "--threads", "1"]);
    let pid = server.child.id();
    let addr = format!("127.0.0.1:{}", server.port);
    let base = settled_rss(pid);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$536870912\r\n").unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..SENT / chunk.len() {
        s.write_all(&chunk).unwrap();
    }
    let held = settled_rss(pid).saturating_sub(base);
    assert!(held <= SENT as u64 * 11 / 10 + (8 << 20), "{} MiB held for 256 MiB sent", held >> 20);
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(3);
    while rss(pid).saturating_sub(base) > 32 << 20 {
        assert!(Instant::now() < deadline, "{} MiB still held after close", (rss(pid) - base) >> 20);
        std::thread::sleep(Duration::from_millis(50));
    }

    let mut c = server.connect();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("client-query-buffer-limit").arg("4mb").query(&mut c).unwrap();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$16777216\r\n").unwrap();
    // Past the limit the server closes: a write fails or a read ends.
    let closed = (0..16).any(|_| s.write_all(&chunk).is_err()) || matches!(s.read(&mut [0u8; 64]), Ok(0) | Err(_));
    assert!(closed, "the query buffer limit did not close the client");
    logged(&server, "query buffer");
}

/// A SCAN cursor from one connection goes on on another, and after a
/// reconnect, and the iteration sees every key.
#[test]
fn scan_cursors_work_on_any_connection() {
    let dir = Scratch::new("edges-scan");
    let server = serve_in(&dir, &["--durability", "off"]);
    let mut c = server.connect();
    for i in 0..40 {
        let _: () = redis::cmd("SET").arg(format!("k{i:02}")).arg(i).query(&mut c).unwrap();
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = 0u64;
    for round in 0.. {
        let mut conn = server.connect(); // a new connection for every call
        let (next, keys): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(5).query(&mut conn).unwrap();
        seen.extend(keys);
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(round < 40, "the scan does not end");
    }
    assert_eq!(seen.len(), 40);
    // HSCAN too.
    for i in 0..30 {
        let _: () = redis::cmd("HSET").arg("h").arg(format!("f{i:02}")).arg(i).query(&mut c).unwrap();
    }
    let (next, _): (u64, Vec<String>) = redis::cmd("HSCAN").arg("h").arg(0).arg("COUNT").arg(5).query(&mut c).unwrap();
    assert_ne!(next, 0);
    let r: RedisResult<(u64, Vec<String>)> = redis::cmd("HSCAN").arg("h").arg(next).query(&mut server.connect());
    assert!(r.is_ok(), "{r:?}");
}

/// Every CONFIG SET takes effect or says why not, and a CONFIG SET with
/// one bad parameter changes none.
#[test]
fn config_set_takes_effect_or_says_why() {
    let dir = Scratch::new("edges-config");
    let server = serve_in(&dir, &["--data-dir", "db"]);
    let mut c = server.connect();
    let e = cmd(&mut c, &["CONFIG", "SET", "appendonly", "no"]).unwrap_err().to_string();
    assert!(e.contains("appendonly") && e.contains("--durability"), "{e}");
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).unwrap(), Value::Okay);
    let e = cmd(&mut c, &["CONFIG", "SET", "save", "900 1"]).unwrap_err().to_string();
    assert!(e.contains("save"), "{e}");
    let e = cmd(&mut c, &["CONFIG", "SET", "timeout", "30"]).unwrap_err().to_string();
    assert!(e.contains("timeout"), "{e}");
    let e = cmd(&mut c, &["CONFIG", "SET", "maxclients", "7", "appendonly", "no"]).unwrap_err().to_string();
    assert!(e.contains("appendonly"), "{e}");
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("maxclients").query(&mut c).unwrap();
    assert_eq!(got, ["maxclients", "10000"], "a failed CONFIG SET changed a parameter");
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "maxclients", "7", "protected-mode", "no"]).unwrap(), Value::Okay);
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("protected-mode").query(&mut c).unwrap();
    assert_eq!(got, ["protected-mode", "no"]);
    drop(server);
    let server = serve_in(&dir, &["--durability", "off"]);
    let e = cmd(&mut server.connect(), &["CONFIG", "SET", "appendonly", "yes"]).unwrap_err().to_string();
    assert!(e.contains("appendonly") && e.contains("--durability"), "{e}");
}

/// INFO persistence's field `name`.
fn info_field(c: &mut Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    let line = info.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("{name}: {info}"));
    line.split_once(':').unwrap().1.to_string()
}

/// An idle server installs no checkpoints; after a write, the next one
/// holds only what changed, and INFO persistence says what it wrote.
#[test]
fn an_idle_server_writes_no_checkpoints() {
    let dir = Scratch::new("edges-idle");
    let server = serve_in(&dir, &["--data-dir", "db", "--checkpoint-interval", "0.1"]);
    let mut c = server.connect();
    // In four commands, so that few checkpoints (a short chain) come first.
    let value = vec![b'v'; 1000];
    for batch in 0..4 {
        let mut mset = redis::cmd("MSET");
        for i in batch * 1000..(batch + 1) * 1000 {
            mset.arg(format!("k{i}")).arg(&value);
        }
        let _: () = mset.query(&mut c).unwrap();
    }
    let count = |c: &mut Connection| info_field(c, "epochdb_checkpoints").parse::<u64>().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(&mut c) == 0 || info_field(&mut c, "epochdb_checkpoint_in_progress") != "0" {
        assert!(Instant::now() < deadline, "no checkpoint: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500)); // one more may cover the last writes
    let idle = count(&mut c);
    std::thread::sleep(Duration::from_millis(1500)); // fifteen intervals
    assert_eq!(count(&mut c), idle, "checkpoints installed while nothing was written");

    // A chain the load left long enough to compact (a slow load takes
    // more of its checkpoints) is compacted by this one, so the one after
    // the write holds the write alone.
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(&mut c) == idle || info_field(&mut c, "epochdb_checkpoint_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE took no checkpoint: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let settled = count(&mut c);
    let _: () = redis::cmd("SET").arg("one").arg("more").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(&mut c) == settled {
        assert!(Instant::now() < deadline, "no checkpoint after a write: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut c, "epochdb_last_checkpoint_kind"), "incremental");
    let bytes: u64 = info_field(&mut c, "epochdb_last_checkpoint_bytes").parse().unwrap();
    // One key, and a header for each table's files: a tenth of the data.
    assert!(bytes < 400_000, "{bytes} bytes written for one key in a 4 MB database");
    server.shutdown();
    // What it wrote recovers whole.
    let server = serve_in(&dir, &["--data-dir", "db"]);
    let mut c = server.connect();
    assert_eq!(get(&mut c, "one").as_deref(), Some("more"));
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 4001);
}

/// A CA and a certificate it signed for `localhost` and 127.0.0.1, with
/// its key, made in `dir` by `scripts/tls-certs.sh` (openssl): (ca, cert,
/// key).
fn certificates(dir: &Path) -> [String; 3] {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/tls-certs.sh");
    let out = Command::new(script).arg(dir).output().expect("run scripts/tls-certs.sh");
    assert!(out.status.success(), "scripts/tls-certs.sh: {}", text(&out));
    ["ca.crt", "server.crt", "server.key"].map(|f| dir.join(f).to_str().unwrap().to_string())
}

/// The first word after `label` in what a server printed (waiting for it).
fn printed_after(printed: &std::sync::Mutex<String>, label: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(rest) = printed.lock().unwrap().split(label).nth(1) {
            return rest.split_whitespace().next().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "nothing printed after {label:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `epochdb serve` with TLS arguments: the server, and its TLS port.
fn serve_tls(cwd: &Path, args: &[&str]) -> (Served, u16) {
    let (server, printed) = serve_printing(cwd, args);
    let addr: std::net::SocketAddr = printed_after(&printed, "TLS on ").parse().unwrap();
    (server, addr.port())
}

/// `redis-cli --tls` against `port` with `tls` (CA, and a client
/// certificate and key unless empty): what it printed, and whether it
/// succeeded.
fn tls_cli(port: u16, ca: &str, client: Option<(&str, &str)>, args: &[&str]) -> (bool, String) {
    let mut c = Command::new("redis-cli");
    c.args(["--tls", "--cacert", ca, "-p", &port.to_string()]);
    if let Some((cert, key)) = client {
        c.args(["--cert", cert, "--key", key]);
    }
    let out = c.args(args).output().expect("run redis-cli (redis-tools)");
    let said = text(&out);
    (out.status.success() && !said.contains("Error"), said)
}

/// TLS clients on `--tls-port` beside the plain port, with client
/// certificates required by default, optional or not asked for; and a
/// replica that follows its primary over TLS (`--tls-replication yes`),
/// where one without TLS gets nothing.
#[test]
fn tls_serves_clients_and_replicas() {
    let dir = Scratch::new("edges-tls");
    let [ca, cert, key] = certificates(&dir);
    let tls = ["--tls-cert-file", &cert, "--tls-key-file", &key, "--tls-ca-cert-file", &ca];
    let client = Some((cert.as_str(), key.as_str()));
    let (server, port) = serve_tls(&dir, &[&["--durability", "off", "--tls-port", "0"][..], &tls].concat());
    assert_eq!(tls_cli(port, &ca, client, &["SET", "over", "tls"]), (true, "OK\n".into()));
    assert_eq!(get(&mut server.connect(), "over").as_deref(), Some("tls"), "the plain port serves the same data");
    let (ok, said) = tls_cli(port, &ca, None, &["GET", "over"]);
    assert!(!ok, "a client with no certificate was let in: {said}");
    // A large reply crosses many TLS records and socket writes.
    let big = "x".repeat(3 << 20);
    let mut c = server.connect();
    let _: () = redis::cmd("SET").arg("big").arg(&big).query(&mut c).unwrap();
    let (ok, said) = tls_cli(port, &ca, client, &["STRLEN", "big"]);
    assert!(ok && said.trim() == "3145728", "{said}");
    let (ok, said) = tls_cli(port, &ca, client, &["--no-raw", "GET", "big"]);
    assert!(ok && said.len() > 3 << 20, "{} bytes", said.len());
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("tls-port").query(&mut c).unwrap();
    assert_eq!(got, ["tls-port".to_string(), port.to_string()]);
    let e = cmd(&mut c, &["CONFIG", "SET", "tls-auth-clients", "no"]).unwrap_err().to_string();
    assert!(e.contains("read at start"), "{e}");
    drop(server);

    for auth in ["no", "optional"] {
        let args = [&["--durability", "off", "--tls-port", "0", "--tls-auth-clients", auth][..], &tls].concat();
        let (_server, port) = serve_tls(&dir, &args);
        let (ok, said) = tls_cli(port, &ca, None, &["PING"]);
        assert!(ok && said == "PONG\n", "tls-auth-clients {auth}: {said}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_epochdb")).args(["serve", "--tls-port", "0"]).output().unwrap();
    assert!(text(&out).contains("--tls-cert-file"), "{}", text(&out));

    // Replication over TLS, and a replica without it.
    let repl_tls = [&tls[..], &["--tls-replication", "yes"]].concat();
    let primary_args = [&["--data-dir", "p", "--replicate-listen", "127.0.0.1:0"][..], &repl_tls].concat();
    let (primary, printed) = serve_printing(&dir, &primary_args);
    let listen = printed_after(&printed, "backups connect to ");
    let mut c = primary.connect();
    let _: () = redis::cmd("SET").arg("replicated").arg("over tls").query(&mut c).unwrap();
    let (replica, _) = serve_printing(&dir, &[&["--data-dir", "r", "--replicaof", &listen][..], &repl_tls].concat());
    let mut r = replica.connect();
    // Until the replica has heard its primary it answers LOADING.
    let mut read = |key: &str| redis::cmd("GET").arg(key).query::<Option<String>>(&mut r).ok().flatten();
    let deadline = Instant::now() + Duration::from_secs(20);
    while read("replicated").as_deref() != Some("over tls") {
        assert!(Instant::now() < deadline, "the replica has nothing: {}\n{}", replica.log(), primary.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = redis::cmd("SET").arg("later").arg("too").query(&mut c).unwrap();
    while read("later").as_deref() != Some("too") {
        assert!(Instant::now() < deadline, "the replica stopped following: {}", replica.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // A replica that speaks in the clear gets nothing: it never starts
    // serving, and the primary logs the failed handshake.
    let args: Vec<std::ffi::OsString> =
        ["serve", "--port", "0", "--data-dir", "plain", "--replicaof", &listen].iter().map(Into::into).collect();
    let (mut plain, _, _) = common::spawn_in(&dir, &args);
    logged(&primary, "no TLS handshake");
    assert!(plain.try_wait().unwrap().is_none() || !plain.wait().unwrap().success());
    let _ = plain.kill();
    let _ = plain.wait();
}

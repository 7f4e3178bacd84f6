//! `epochdb serve` as a process: kill -9 of a durable server, then a
//! restart that has every write whose reply was sent; and redis-cli and
//! redis-benchmark against it when they are installed.

mod common;

use common::{join_writers, start_writers, Acked, Served};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts a durable server on a port the kernel picks (`--port 0`) and waits
/// for the line that names it. Probing a guessed port by connecting is racy:
/// another test's server may hold it, and a connect to a free port on
/// loopback can connect to itself.
fn serve(dir: &std::path::Path) -> Served {
    serve_with(dir, &[]).0
}

/// `serve` with more arguments; with `--replicate-listen`, also the
/// address backups connect to.
fn serve_with(dir: &std::path::Path, more: &[&str]) -> (Served, Option<String>) {
    // Durable replies unless `more` says otherwise.
    let fsync: &[&str] = if more.contains(&"--appendfsync") { &[] } else { &["--appendfsync", "always"] };
    let mut args: Vec<std::ffi::OsString> = ["serve", "--port", "0", "--durability", "log", "--threads", "2"]
        .iter()
        .chain(fsync)
        .chain(more)
        .map(Into::into)
        .collect();
    args.extend(["--data-dir".into(), dir.as_os_str().to_owned()]);
    let (child, stderr, mut lines) = common::spawn(&args);
    let port = common::port_of(&mut lines, &stderr);
    let repl = more.contains(&"--replicate-listen").then(|| loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(rest) = line.split("backups connect to ").nth(1) {
                    break rest.trim().to_string();
                }
            }
            _ => panic!("epochdb serve exited before listening for backups: {}", stderr.lock().unwrap()),
        }
    });
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (Served { child, port, stderr }, repl)
}

/// Checks that a restarted `server` has every write the writers saw
/// answered (`acked`), and at least `incrs` INCRs of `total` (those
/// answered over every round so far).
fn assert_kept(server: &Served, round: u64, acked: &[Acked], incrs: i64) {
    let addr = format!("redis://127.0.0.1:{}/", server.port);
    let mut c = redis::Client::open(addr).unwrap().get_connection().unwrap();
    let total: i64 = redis::cmd("GET").arg("total").query(&mut c).unwrap();
    assert!(
        total >= incrs,
        "round {round}: {incrs} INCRs acknowledged, total is {total}; restarted server said: {}",
        server.log()
    );
    for (w, (a, _)) in acked.iter().enumerate() {
        let got: Option<u64> = redis::cmd("GET").arg(format!("w{w}")).query(&mut c).unwrap();
        if let Some(a) = a {
            // The acknowledged value, or one sent later whose reply was lost.
            assert!(
                got.is_some_and(|g| g >= *a),
                "round {round}: writer {w} acked {a}, found {got:?}; server said: {}",
                server.log()
            );
        }
    }
}

#[test]
fn a_killed_durable_server_keeps_every_acknowledged_write() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut incrs = 0; // INCRs of "total" acknowledged, over every round
    for round in 0..3u64 {
        let mut server = serve(&dir);
        let addr = format!("redis://127.0.0.1:{}/", server.port);
        let writers = start_writers(&addr, round * 1_000_000);
        std::thread::sleep(Duration::from_millis(300 + 200 * round));
        server.child.kill().unwrap(); // SIGKILL
        server.child.wait().unwrap();
        let acked = join_writers(writers, &server);
        let mut server = serve(&dir);
        incrs += acked.iter().map(|a| a.1).sum::<i64>();
        assert_kept(&server, round, &acked, incrs);
        server.child.kill().unwrap();
        server.child.wait().unwrap();
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A queue (RPUSH by producers, LPOP by consumers) and a leaderboard
/// (points moved between members by MULTI/EXEC of two ZINCRBYs) on a
/// durable server killed with SIGKILL: after a restart every acknowledged
/// push is in the list or was popped, no acknowledged pop is in the list,
/// nothing is there twice, and the leaderboard's sum holds.
#[test]
fn a_killed_durable_server_keeps_its_queue_and_leaderboard_whole() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-kill-types-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (players, start) = (6, 1000.0);
    let mut pushed: Vec<String> = Vec::new();
    let mut popped: Vec<String> = Vec::new();
    for round in 0..2u64 {
        let mut server = serve(&dir);
        let addr = format!("redis://127.0.0.1:{}/", server.port);
        let mut c = redis::Client::open(addr.as_str()).unwrap().get_connection().unwrap();
        if round == 0 {
            for p in 0..players {
                let _: i64 = redis::cmd("ZADD").arg("board").arg(start).arg(format!("p{p}")).query(&mut c).unwrap();
            }
        }
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut c = redis::Client::open(addr).unwrap().get_connection().unwrap();
                    let mut acked = Vec::new();
                    for i in 0.. {
                        let item = format!("{round}:{p}:{i}");
                        let r: redis::RedisResult<i64> = redis::cmd("RPUSH").arg("queue").arg(&item).query(&mut c);
                        if r.is_err() {
                            break;
                        }
                        acked.push(item);
                    }
                    acked
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut c = redis::Client::open(addr).unwrap().get_connection().unwrap();
                    let mut got = Vec::new();
                    loop {
                        let r: redis::RedisResult<Option<String>> = redis::cmd("LPOP").arg("queue").query(&mut c);
                        match r {
                            Ok(Some(item)) => got.push(item),
                            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                            Err(_) => return got,
                        }
                        let (from, to) = (got.len() % players, (got.len() * 7 + 3) % players);
                        let r: redis::RedisResult<redis::Value> = redis::pipe()
                            .atomic()
                            .cmd("ZINCRBY")
                            .arg("board")
                            .arg(-3)
                            .arg(format!("p{from}"))
                            .cmd("ZINCRBY")
                            .arg("board")
                            .arg(3)
                            .arg(format!("p{to}"))
                            .query(&mut c);
                        if r.is_err() {
                            return got;
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        server.child.kill().unwrap(); // SIGKILL
        server.child.wait().unwrap();
        for t in producers {
            pushed.extend(t.join().unwrap());
        }
        for t in consumers {
            popped.extend(t.join().unwrap());
        }
        let mut server = serve(&dir);
        let mut c =
            redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap().get_connection().unwrap();
        let list: Vec<String> = redis::cmd("LRANGE").arg("queue").arg(0).arg(-1).query(&mut c).unwrap();
        let in_list: std::collections::HashSet<&String> = list.iter().collect();
        assert_eq!(in_list.len(), list.len(), "round {round}: an item is in the queue twice");
        let popped_set: std::collections::HashSet<&String> = popped.iter().collect();
        assert_eq!(popped_set.len(), popped.len(), "round {round}: an item was popped twice");
        assert!(popped.iter().all(|p| !in_list.contains(p)), "round {round}: a popped item is back in the queue");
        // Each consumer may have had one pop in flight, whose reply the
        // kill took: its item is gone, unacknowledged.
        let lost = pushed.iter().filter(|i| !in_list.contains(i) && !popped_set.contains(i)).count();
        assert!(lost <= 2 * (round as usize + 1), "round {round}: {lost} acknowledged pushes are gone");
        let board: Vec<(String, f64)> =
            redis::cmd("ZRANGE").arg("board").arg(0).arg(-1).arg("WITHSCORES").query(&mut c).unwrap();
        assert_eq!(board.len(), players);
        assert_eq!(board.iter().map(|(_, s)| s).sum::<f64>(), start * players as f64, "round {round}");
        assert!(pushed.len() > 10 && popped.len() > 10, "round {round}: too little traffic to test");
        server.child.kill().unwrap();
        server.child.wait().unwrap();
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// SIGTERM (what `systemctl stop` and `docker stop` send) and SIGINT stop
/// the server as SHUTDOWN does: status 0, and with `--appendfsync
/// everysec`, whose replies go at commit, before the log is synced, a
/// restart still has every write whose reply was sent.
#[test]
fn sigterm_and_sigint_stop_the_server_cleanly_and_keep_every_acknowledged_write() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-sigterm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut incrs = 0;
    for (round, signal) in [libc::SIGTERM, libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
        let (mut server, _) = serve_with(&dir, &["--appendfsync", "everysec"]);
        let addr = format!("redis://127.0.0.1:{}/", server.port);
        let writers = start_writers(&addr, round as u64 * 1_000_000);
        std::thread::sleep(Duration::from_millis(300 + 100 * round as u64));
        let status = server.signal_and_wait(signal);
        assert!(status.success(), "round {round}: {status}; server said: {}", server.log());
        assert!(server.log().contains("stopping the server cleanly"), "{}", server.log());
        let acked = join_writers(writers, &server);
        incrs += acked.iter().map(|a| a.1).sum::<i64>();
        assert_kept(&serve(&dir), round as u64, &acked, incrs);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `--maxmemory` (a process of its own: the limit is on the whole
/// process's records and index): past it SET is refused with Redis's OOM
/// error, in MULTI too, while reads and deletes go on; deletes bring the
/// memory back under it, and SET works again.
#[test]
fn maxmemory_refuses_growth_and_takes_writes_again_after_deletes() {
    let dir = std::env::temp_dir().join(format!("epochdb-serve-maxmemory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (server, _) = serve_with(&dir, &["--maxmemory", "4mb", "--appendfsync", "everysec"]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap().get_connection().unwrap();
    let value = vec![b'v'; 2000];
    let refused = (0..10_000)
        .find_map(|i| {
            let r: redis::RedisResult<()> = redis::cmd("SET").arg(format!("k{i}")).arg(&value).query(&mut c);
            r.err().map(|e| (i, e.to_string()))
        })
        .expect("a SET refused");
    assert!(
        refused.1.starts_with("OOM") && refused.1.contains("command not allowed when used memory > 'maxmemory'"),
        "{refused:?}"
    );
    // 2,000-byte values: the refusal comes near 4 MiB of them.
    assert!((1000..2500).contains(&refused.0), "refused after {} keys", refused.0);
    let memory: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    assert!(memory.contains("maxmemory:4194304\r\n"), "{memory}");
    let got: Vec<u8> = redis::cmd("GET").arg("k0").query(&mut c).unwrap();
    assert_eq!(got, value);
    let multi: redis::RedisResult<((),)> = redis::pipe().atomic().cmd("SET").arg("m").arg(1).query(&mut c);
    assert!(multi.is_err(), "a MULTI with a SET ran");
    let deleted: i64 =
        redis::cmd("DEL").arg((0..500).map(|i| format!("k{i}")).collect::<Vec<_>>()).query(&mut c).unwrap();
    assert_eq!(deleted, 500);
    // Freed once no reader can see the deleted rows: a few epochs.
    let deadline = Instant::now() + Duration::from_secs(20);
    while redis::cmd("SET").arg("again").arg(&value).query::<()>(&mut c).is_err() {
        assert!(Instant::now() < deadline, "SET still refused after deletes: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0").query(&mut c).unwrap();
    for i in 0..2000 {
        let _: () = redis::cmd("SET").arg(format!("after{i}")).arg(&value).query(&mut c).unwrap();
    }
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

/// Loss of the primary's machine under `--safety sync`: the primary and
/// its backup are killed with SIGKILL while clients write; the backup's
/// directory, served on its own, has every write whose reply was sent.
#[test]
fn a_sync_backup_keeps_every_acknowledged_write_when_the_primary_is_killed() {
    let base = std::env::temp_dir().join(format!("epochdb-serve-repl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    for round in 0..3u64 {
        let (pdir, bdir) = (base.join(format!("p{round}")), base.join(format!("b{round}")));
        let (mut primary, repl) = serve_with(&pdir, &["--replicate-listen", "127.0.0.1:0", "--safety", "sync"]);
        let repl = repl.unwrap();
        let mut replica = Command::new(env!("CARGO_BIN_EXE_epochdb"))
            .args(["replica", "--primary", &repl])
            .arg("--data-dir")
            .arg(&bdir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start epochdb replica");
        let addr = format!("redis://127.0.0.1:{}/", primary.port);
        let mut c = redis::Client::open(addr.clone()).unwrap().get_connection().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap();
            if info.contains("state=online") {
                break;
            }
            assert!(Instant::now() < deadline, "the backup never came in sync: {info}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let writers = start_writers(&addr, 0);
        std::thread::sleep(Duration::from_millis(300 + 200 * round));
        primary.child.kill().unwrap();
        replica.kill().unwrap();
        primary.child.wait().unwrap();
        replica.wait().unwrap();
        let acked = join_writers(writers, &primary);
        assert!(acked.iter().all(|a| a.0.is_some()), "some writer never got a reply");
        // Promote by hand: serve the backup's directory.
        let mut promoted = serve(&bdir);
        let mut c =
            redis::Client::open(format!("redis://127.0.0.1:{}/", promoted.port)).unwrap().get_connection().unwrap();
        for (w, (a, _)) in acked.iter().enumerate() {
            let got: Option<u64> = redis::cmd("GET").arg(format!("w{w}")).query(&mut c).unwrap();
            let a = a.unwrap();
            assert!(
                got.is_some_and(|g| g >= a),
                "round {round}: writer {w} acked {a}, the backup has {got:?}; it said: {}",
                promoted.log()
            );
        }
        promoted.child.kill().unwrap();
        promoted.child.wait().unwrap();
    }
    std::fs::remove_dir_all(&base).ok();
}

/// Runs `epochdb <args>` against `server` and returns its standard output.
fn epochdb(args: &[&str], server: &Served) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_epochdb")).args(args).output().expect("run epochdb");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "epochdb {args:?} failed: {out}{err}; the server said: {}", server.log());
    out
}

fn dbsize(c: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(c).unwrap()
}

/// `keys=` of INFO keyspace's db0 line, once it is `want` or 10 s passed
/// (a count is taken in the background after a start or a promotion, and
/// on a replica again once the last is a second old).
fn keys_counted(c: &mut redis::Connection, want: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("keyspace").query(c).unwrap();
        let keys = info.lines().find_map(|l| l.strip_prefix("db0:keys=")?.split(',').next()?.parse().ok());
        if keys == Some(want) || Instant::now() > deadline {
            return keys.unwrap_or(0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve --replicaof`: a replica serves reads at its read view (a MULTI
/// on the primary is all or nothing there), refuses writes, reports its
/// link, and `epochdb promote` makes it the primary in place after the
/// primary is killed, with every write the primary acknowledged (sync).
#[test]
fn a_replica_serves_reads_and_is_promoted_in_place_when_the_primary_is_killed() {
    let base = std::env::temp_dir().join(format!("epochdb-serve-replicaof-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (pdir, rdir) = (base.join("p"), base.join("r"));
    let (mut primary, repl) = serve_with(&pdir, &["--replicate-listen", "127.0.0.1:0", "--safety", "sync"]);
    let repl = repl.unwrap();
    let paddr = format!("redis://127.0.0.1:{}/", primary.port);
    let mut pc = redis::Client::open(paddr.clone()).unwrap().get_connection().unwrap();
    let () = redis::cmd("SET").arg("hello").arg("world").query(&mut pc).unwrap();
    let (mut replica, _) = serve_with(&rdir, &["--replicaof", &repl]);
    let rport = replica.port.to_string();
    let mut rc = redis::Client::open(format!("redis://127.0.0.1:{rport}/")).unwrap().get_connection().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("GET").arg("hello").query::<Option<String>>(&mut rc).ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "the replica never showed the primary's write: {}", replica.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = redis::cmd("SET").arg("x").arg("1").query::<()>(&mut rc).unwrap_err();
    assert_eq!(err.kind(), redis::ErrorKind::ReadOnly, "{err}");
    // INFO keyspace on a replica: a count of what it shows (at most a
    // second old); the writes below come after it.
    let shown = dbsize(&mut rc);
    assert_eq!(keys_counted(&mut rc, shown), shown, "the replica's INFO keyspace");
    let role: (String, String, i64, String, i64) = redis::cmd("ROLE").query(&mut rc).unwrap();
    assert_eq!((&role.0[..], &role.1[..], &role.3[..]), ("slave", "127.0.0.1", "connected"), "{role:?}");
    let info: String = redis::cmd("INFO").arg("replication").query(&mut rc).unwrap();
    assert!(info.contains("role:slave") && info.contains("master_link_status:up"), "{info}");
    let err = redis::cmd("WAIT").arg(0).arg(0).query::<i64>(&mut rc).unwrap_err();
    assert!(err.to_string().contains("replica"), "{err}");
    // A MULTI of two INCRs on the primary, read on the replica with MGET:
    // never half of one.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let multi = {
        let paddr = paddr.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(paddr).unwrap().get_connection().unwrap();
            let mut acked = 0i64;
            while redis::pipe().atomic().incr("a", 1).incr("b", 1).query::<(i64, i64)>(&mut c).is_ok() {
                acked += 1;
            }
            acked
        })
    };
    let reader = {
        let stop = stop.clone();
        let raddr = format!("redis://127.0.0.1:{rport}/");
        std::thread::spawn(move || {
            let mut c = redis::Client::open(raddr).unwrap().get_connection().unwrap();
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let (a, b): (Option<i64>, Option<i64>) = redis::cmd("MGET").arg("a").arg("b").query(&mut c).unwrap();
                assert_eq!(a, b, "the replica showed half of a MULTI");
                reads += 1;
            }
            reads
        })
    };
    let writers = start_writers(&paddr, 0);
    std::thread::sleep(Duration::from_millis(800));
    primary.child.kill().unwrap(); // SIGKILL
    primary.child.wait().unwrap();
    let acked = join_writers(writers, &primary);
    let multis = multi.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let reads = reader.join().unwrap_or_else(|_| panic!("the reader failed; the replica said: {}", replica.log()));
    assert!(multis > 0 && reads > 0, "{multis} MULTIs, {reads} reads");
    eprintln!("{multis} MULTIs acknowledged, {reads} MGETs on the replica, {:?} acknowledged by the writers", acked);
    let out = epochdb(&["promote", "--timeout", "30", "--port", &rport], &replica);
    assert!(out.contains("is a primary in term 1") && !out.contains("epochs <= ?"), "{out}");
    for (w, (a, _)) in acked.iter().enumerate() {
        let got: Option<u64> = redis::cmd("GET").arg(format!("w{w}")).query(&mut rc).unwrap();
        assert!(got >= *a, "writer {w} acked {a:?}, the promoted replica has {got:?}; it said: {}", replica.log());
    }
    let incrs: i64 = acked.iter().map(|a| a.1).sum();
    let total: i64 = redis::cmd("GET").arg("total").query(&mut rc).unwrap();
    let (a, b): (i64, i64) = redis::cmd("MGET").arg("a").arg("b").query(&mut rc).unwrap();
    assert!(total >= incrs && a == b && a >= multis, "total {total} of {incrs}; a {a}, b {b} of {multis}");
    // A primary now: it takes writes, and answers them once durable.
    let () = redis::cmd("SET").arg("after").arg("promotion").query(&mut rc).unwrap();
    // Counted again after the promotion, then kept as writes commit.
    let n = dbsize(&mut rc);
    assert_eq!(keys_counted(&mut rc, n), n, "INFO keyspace after the promotion");
    let () = redis::cmd("DEL").arg("after").query(&mut rc).unwrap();
    assert_eq!(keys_counted(&mut rc, n - 1), n - 1, "INFO keyspace after a DEL");
    let () = redis::cmd("SET").arg("after").arg("promotion").query(&mut rc).unwrap();
    let status = epochdb(&["status", "--port", &rport], &replica);
    assert!(status.contains("role: master") && status.contains("epochdb_term: 1"), "{status}");
    replica.child.kill().unwrap();
    replica.child.wait().unwrap();
    // Restarted as a plain server, it is the new term's primary.
    let mut again = serve(&rdir);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", again.port)).unwrap().get_connection().unwrap();
    let got: Option<String> = redis::cmd("GET").arg("after").query(&mut c).unwrap();
    assert_eq!(got.as_deref(), Some("promotion"));
    let status = epochdb(&["status", "--json", "--port", &again.port.to_string()], &again);
    assert!(status.contains("\"epochdb_term\":1"), "{status}");
    again.child.kill().unwrap();
    again.child.wait().unwrap();
    std::fs::remove_dir_all(&base).ok();
}

/// `REPLICAOF HOST PORT` moves a replica to another primary: here a
/// sibling replica promoted after the primary was killed. It is refused
/// on a primary (a primary becomes a replica only by a restart).
#[test]
fn replicaof_moves_a_replica_to_a_promoted_sibling() {
    let base = std::env::temp_dir().join(format!("epochdb-serve-follow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (pdir, adir, bdir) = (base.join("p"), base.join("a"), base.join("b"));
    let (mut primary, repl) = serve_with(&pdir, &["--replicate-listen", "127.0.0.1:0", "--safety", "sync"]);
    let repl = repl.unwrap();
    // Where `a`'s own backups connect once it is promoted.
    let a_repl = common::free_port();
    let (mut a, _) = serve_with(&adir, &["--replicaof", &repl, &format!("--replicate-listen=127.0.0.1:{a_repl}")]);
    let (mut b, _) = serve_with(&bdir, &["--replicaof", &repl]);
    let conn = |s: &Served| redis::Client::open(format!("redis://127.0.0.1:{}/", s.port)).unwrap();
    let (mut pc, mut bc) = (conn(&primary).get_connection().unwrap(), conn(&b).get_connection().unwrap());
    let () = redis::cmd("SET").arg("before").arg(1).query(&mut pc).unwrap();
    let shows = |c: &mut redis::Connection, key: &str, s: &Served| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while redis::cmd("GET").arg(key).query::<Option<i64>>(c).ok().flatten() != Some(1) {
            assert!(Instant::now() < deadline, "{key} never showed: {}", s.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    shows(&mut bc, "before", &b);
    let err = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(a_repl).query::<()>(&mut pc).unwrap_err();
    assert!(err.to_string().contains("only by a restart"), "{err}");
    let err = redis::cmd("REPLICAOF").arg("127.0.0.1").arg("port").query::<()>(&mut bc).unwrap_err();
    assert!(err.to_string().contains("Invalid master port"), "{err}");
    primary.child.kill().unwrap(); // SIGKILL
    primary.child.wait().unwrap();
    let out = epochdb(&["promote", "--timeout", "30", "--port", &a.port.to_string()], &a);
    assert!(out.contains("is a primary in term 1"), "{out}");
    let () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(a_repl).query(&mut bc).unwrap();
    let role: (String, String, i64, String, i64) = redis::cmd("ROLE").query(&mut bc).unwrap();
    assert_eq!((&role.0[..], role.2), ("slave", i64::from(a_repl)), "{role:?}");
    let () = redis::cmd("SET").arg("after").arg(1).query(&mut conn(&a).get_connection().unwrap()).unwrap();
    shows(&mut bc, "after", &b);
    shows(&mut bc, "before", &b);
    for s in [&mut a, &mut b] {
        s.child.kill().unwrap();
        s.child.wait().unwrap();
    }
    std::fs::remove_dir_all(&base).ok();
}

fn installed(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn redis_cli_and_redis_benchmark_work_against_it() {
    if !installed("redis-cli") || !installed("redis-benchmark") {
        // scripts/test.sh installs them and insists; a bare `cargo test`
        // may lack them.
        assert!(
            std::env::var_os("EPOCHDB_REQUIRE_REDIS_TOOLS").is_none(),
            "redis-cli and redis-benchmark are required"
        );
        eprintln!("redis-cli or redis-benchmark missing: skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("epochdb-serve-tools-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut server = serve(&dir);
    let p = server.port.to_string();
    let cli = |args: &[&str]| {
        let o = Command::new("redis-cli").args(["-p", &p]).args(args).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello world");
    assert_eq!(cli(&["HSET", "h", "a", "1", "b", "2"]), "2");
    assert_eq!(cli(&["--scan"]).lines().count(), 2);
    let o = Command::new("redis-benchmark")
        .args([
            "-p",
            &p,
            "-t",
            "set,get,incr,mset",
            "-n",
            "2000",
            "-c",
            "10",
            "-P",
            "4",
            "-d",
            "100",
            "-r",
            "1000",
            "--csv",
        ])
        .output()
        .unwrap();
    let csv = String::from_utf8_lossy(&o.stdout);
    for test in ["\"SET\"", "\"GET\"", "\"INCR\"", "\"MSET (10 keys)\""] {
        let line = csv.lines().find(|l| l.starts_with(test)).unwrap_or_else(|| panic!("no {test} in {csv}"));
        let rps: f64 = line.split(',').nth(1).unwrap().trim_matches('"').parse().unwrap();
        assert!(rps > 0.0, "{line}");
    }
    assert_eq!(cli(&["SHUTDOWN"]), "");
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "SHUTDOWN did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A pipeline of durable writes is made durable together: the
/// loop hastens the epoch once per pass, after every request it read has
/// committed, so a pipeline read in one pass costs one hastened epoch,
/// not one for its first reply and another for the rest. With 2 s epochs
/// only hastening moves the epoch here: 40 pipelines took 40 epochs, and
/// hastening at each reply (a mutation) 79-80.
#[test]
fn a_durable_pipeline_waits_for_one_hastened_epoch() {
    use std::io::{Read, Write};
    let dir = std::env::temp_dir().join(format!("epochdb-serve-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (server, _) = serve_with(&dir, &["--epoch-ms", "2000"]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_nodelay(true).unwrap();
    let epoch = |s: &mut std::net::TcpStream| -> u64 {
        s.write_all(b"*2\r\n$4\r\nINFO\r\n$11\r\npersistence\r\n").unwrap();
        // A bulk string: `$<len>\r\n`, the text, `\r\n`.
        let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
        let whole = |got: &[u8]| {
            let head = got.windows(2).position(|w| w == b"\r\n")?;
            let len: usize = std::str::from_utf8(&got[1..head]).ok()?.parse().ok()?;
            (got.len() >= head + 2 + len + 2).then_some(())
        };
        while whole(&got).is_none() {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the connection");
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        let line = text.lines().find(|l| l.starts_with("epochdb_epoch:")).expect("INFO persistence names the epoch");
        line["epochdb_epoch:".len()..].trim().parse().unwrap()
    };
    let (pipelines, depth) = (40, 16);
    let before = epoch(&mut s);
    let started = Instant::now();
    for p in 0..pipelines {
        let mut batch = Vec::new();
        for i in 0..depth {
            let (key, value) = (format!("k{p}-{i}"), format!("value {p} {i}"));
            let cmd = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n", key.len(), value.len());
            batch.extend_from_slice(cmd.as_bytes());
        }
        s.write_all(&batch).unwrap(); // one write: read in one pass
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while got.len() < 5 * depth {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the connection");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"+OK\r\n".repeat(depth));
    }
    let advanced = epoch(&mut s) - before;
    // The epoch advancer's own 2 s ticks add one per 2 s elapsed, and a
    // pipeline the kernel splits between two reads may take two epochs;
    // hastening at each reply gave 79 and 80 here.
    let ticks = started.elapsed().as_secs() / 2 + 1;
    assert!(
        advanced <= pipelines + pipelines / 4 + ticks,
        "{pipelines} pipelines advanced the epoch by {advanced}: some waited for two syncs"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

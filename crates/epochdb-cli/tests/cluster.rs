//! `epochdb serve --node-id` and `epochdb witness` as processes: two data
//! nodes and a witness, or three data nodes. The control plane (Raft)
//! appoints the primary; kill -9 of the primary makes an in-sync backup
//! the primary with every acknowledged write (and the other backup, if
//! any, follows it without a restart), and a primary that was stopped
//! (SIGSTOP, as a partition or a long pause would) and comes back
//! releases nothing and exits, deposed.

mod common;

use common::{free_port, join_writers, start_writers, Served};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Three voters on loopback, ids 1 to 3: two data nodes and a witness
/// (id 3), or three data nodes; ports for a fourth that joins.
struct Group {
    base: PathBuf,
    control: [u16; 4],
    replicate: [u16; 4],
    witness: Option<Child>,
}

impl Group {
    /// Two data nodes and a witness.
    fn start(name: &str) -> Group {
        let mut g = Group::three(name);
        g.witness = Some(g.witness(3, g.control[2], &[1, 2], false));
        g
    }

    /// Starts witness `id` on `port`, told the voters `peers` (of ids 1 to 3).
    fn witness(&self, id: u64, port: u16, peers: &[usize], join: bool) -> Child {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_epochdb"));
        cmd.args(["witness", "--node-id", &id.to_string(), "--listen", &format!("127.0.0.1:{port}")]);
        for &p in peers {
            cmd.args(["--peer", &format!("{p}=127.0.0.1:{}", self.control[p - 1])]);
        }
        if join {
            cmd.arg("--join");
        }
        let dir = self.base.join(format!("witness{id}"));
        cmd.arg("--dir").arg(dir).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start a witness")
    }

    /// Three data nodes (none started yet).
    fn three(name: &str) -> Group {
        let base = std::env::temp_dir().join(format!("epochdb-cluster-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let control = [free_port(), free_port(), free_port(), free_port()];
        let replicate = [free_port(), free_port(), free_port(), free_port()];
        Group { base, control, replicate, witness: None }
    }

    /// Starts data node `id` (`--safety sync`) and waits until it serves
    /// (as the primary or as a replica); returns it and the role line it
    /// printed.
    fn node(&self, id: usize) -> (Served, String) {
        self.node_with(id, "sync")
    }

    fn node_with(&self, id: usize, safety: &str) -> (Served, String) {
        let c = |i: usize| format!("127.0.0.1:{}", self.control[i - 1]);
        // Ids 1 to 3 began the group; a fourth joins it.
        let join = (id > 3).then(|| "--join".to_string());
        let peers = (1..=3)
            .filter(|&i| i != id)
            .flat_map(|i| ["--control-peer".to_string(), format!("{i}={}", c(i))])
            .chain(join);
        let args: Vec<OsString> = [
            "serve",
            "--port",
            "0",
            "--durability",
            "log",
            "--appendfsync",
            "always",
            "--threads",
            "2",
            "--safety",
            safety,
            "--node-id",
            &id.to_string(),
            "--control-listen",
            &c(id),
            "--replicate-listen",
            &format!("127.0.0.1:{}", self.replicate[id - 1]),
        ]
        .iter()
        .map(Into::into)
        .chain(peers.map(Into::into))
        .chain([OsString::from("--data-dir"), self.base.join(format!("d{id}")).into_os_string()])
        .collect();
        let (child, stderr, mut lines) = common::spawn(&args);
        let (port, role) = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(rest) = line.split("listening on ").nth(1) {
                        let addr: std::net::SocketAddr = rest.split_whitespace().next().unwrap().parse().unwrap();
                        break (addr.port(), line);
                    }
                }
                _ => panic!("node {id} exited before serving: {}", stderr.lock().unwrap()),
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        (Served { child, port, stderr }, role)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(w) = self.witness.as_mut() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn client(s: &Served) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}/", s.port)).unwrap().get_connection().unwrap()
}

/// A field of `INFO replication`.
fn field(c: &mut redis::Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("replication").query(c).unwrap();
    let prefix = format!("{name}:");
    info.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_default().to_string()
}

/// Waits until `primary` holds its lease with `backup` in the committed
/// in-sync set (so `backup` may take over with everything released).
fn wait_in_sync(primary: &Served, backup: usize) {
    wait_all_in_sync(primary, &backup.to_string());
}

/// Waits until `primary` holds its lease with the committed in-sync set
/// `nodes` (ids in order, comma-separated).
fn wait_all_in_sync(primary: &Served, nodes: &str) {
    let mut c = client(primary);
    let deadline = Instant::now() + Duration::from_secs(60);
    while field(&mut c, "epochdb_in_sync_nodes") != nodes || field(&mut c, "epochdb_lease_valid") != "1" {
        assert!(Instant::now() < deadline, "nodes {nodes} never came in sync: {}", primary.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes on `s` until a durable reply comes (it is the primary, with a
/// lease); returns how long that took.
fn until_it_takes_writes(s: &Served, key: &str) -> Duration {
    let start = Instant::now();
    let mut c = client(s);
    while redis::cmd("SET").arg(key).arg(1).query::<()>(&mut c).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "it never took writes: {}", s.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// Both data nodes of `g` under `async`: the primary, holding its lease
/// with the other in the committed in-sync set, and the other.
fn async_pair(g: &Group) -> (Served, Served) {
    let (a, role) = g.node_with(1, "async");
    let b = g.node_with(2, "async").0;
    let (p, b, backup) = if role.contains("as the primary") { (a, b, 2) } else { (b, a, 1) };
    wait_in_sync(&p, backup);
    (p, b)
}

/// Kills `p` (kill -9) while writers run against it; returns what they
/// had acknowledged.
fn kill_while_writing(p: &mut Served) -> Vec<common::Acked> {
    let writers = start_writers(&format!("redis://127.0.0.1:{}/", p.port), 0);
    std::thread::sleep(Duration::from_millis(300));
    kill(p);
    join_writers(writers, p)
}

/// Once `s` takes writes: it has every write in `acked`.
fn has_acknowledged(s: &Served, acked: &[common::Acked]) {
    until_it_takes_writes(s, "after");
    let mut c = client(s);
    for (w, (a, _)) in acked.iter().enumerate() {
        let got: Option<u64> = redis::cmd("GET").arg(format!("w{w}")).query(&mut c).unwrap();
        assert!(got >= *a, "writer {w} acked {a:?}, the new primary has {got:?}: {}", s.log());
    }
}

/// `epochdb member ARGS` through `via`: whether it succeeded, and what it said.
fn member(args: &[&str], via: &Served) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .arg("member")
        .args(args)
        .args(["--timeout", "30", "--port", &via.port.to_string()])
        .output()
        .expect("run epochdb member");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

fn kill(s: &mut Served) {
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
}

#[test]
fn the_in_sync_backup_takes_over_with_every_acknowledged_write() {
    let g = Group::start("failover");
    let (a, role) = g.node(1);
    let mut nodes = [Some(a), None];
    std::thread::sleep(Duration::from_millis(200));
    nodes[1] = Some(g.node(2).0);
    // A new group appoints whichever data node wins the first election.
    let mut primary = if role.contains("as the primary") { 1 } else { 2 };
    let mut times = Vec::new();
    for round in 0..4u64 {
        let backup = 3 - primary;
        let p = nodes[primary - 1].as_mut().unwrap();
        wait_in_sync(p, backup);
        let writers = start_writers(&format!("redis://127.0.0.1:{}/", p.port), round * 1_000_000);
        std::thread::sleep(Duration::from_millis(200 + 150 * round));
        kill(p);
        let killed = Instant::now();
        let acked = join_writers(writers, p);
        let b = nodes[backup - 1].as_ref().unwrap();
        until_it_takes_writes(b, &format!("round{round}"));
        times.push(killed.elapsed());
        let mut c = client(b);
        for (w, (a, _)) in acked.iter().enumerate() {
            let got: Option<u64> = redis::cmd("GET").arg(format!("w{w}")).query(&mut c).unwrap();
            assert!(got >= *a, "round {round}: writer {w} acked {a:?}, node {backup} has {got:?}: {}", b.log());
        }
        let incrs: i64 = acked.iter().map(|a| a.1).sum();
        assert!(incrs > 0, "round {round}: no write acknowledged before the kill");
        // The killed node comes back as the new primary's backup.
        let (back, role) = g.node(primary);
        assert!(role.contains(&format!("a replica of node {backup}")), "{role}: {}", back.log());
        nodes[primary - 1] = Some(back);
        primary = backup;
    }
    eprintln!("kill -9 of the primary to a durable write on the new one: {times:?}");
    assert!(times.iter().all(|t| *t < Duration::from_secs(10)), "{times:?}");
    for n in nodes.iter_mut().flatten() {
        kill(n);
    }
}

/// Under `async`, where no backup's acknowledgement holds release back,
/// only the lease fences the stopped primary.
#[test]
fn a_stopped_primary_that_comes_back_releases_nothing_and_exits_deposed() {
    let g = Group::start("fence");
    let (mut p, b) = async_pair(&g);
    let pid = p.child.id().to_string();
    let signal = |sig: &str| assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    let mut c = client(&p); // connected while it runs
    signal("-STOP");
    // The signal is sent; wait until every thread has stopped (state T),
    // so that the write below cannot be run before the stop.
    let stopped = || {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        tasks.flatten().all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('T'))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stopped() {
        assert!(Instant::now() < deadline, "the primary did not stop: {}", p.log());
        std::thread::sleep(Duration::from_millis(1));
    }
    // A write sent to the stopped primary waits in its socket.
    let fenced = std::thread::spawn(move || redis::cmd("SET").arg("fenced").arg(1).query::<()>(&mut c));
    let took = until_it_takes_writes(&b, "after");
    eprintln!("a stopped primary replaced in {took:?}");
    signal("-CONT");
    let status = p.wait_exit(Duration::from_secs(20)); // deposed: it exits
    assert_eq!(status.code(), Some(3), "{}", p.log());
    let acked = fenced.join().unwrap();
    assert!(acked.is_err(), "the deposed primary acknowledged a durable write\n{}\nnew primary:\n{}", p.log(), b.log());
    assert!(p.log().contains("deposed"), "{}", p.log());
    let got: Option<i64> = redis::cmd("GET").arg("fenced").query(&mut client(&b)).unwrap();
    let logs = format!("deposed:\n{}\nnew primary:\n{}", p.log(), b.log());
    assert_eq!(got, None, "a write to the deposed primary reached the new one\n{logs}");
    kill(&mut p);
    let mut b = b;
    kill(&mut b);
}

/// `epochdb promote` of a controlled replica is a planned switchover: the
/// primary stops releasing, waits for the replica to have everything it
/// released, and hands over. Under `async` too, no acknowledged write is
/// lost; the old primary exits deposed.
#[test]
fn a_planned_switchover_loses_no_acknowledged_write_even_async() {
    let g = Group::start("switchover");
    let (mut p, b) = async_pair(&g);
    let writers = start_writers(&format!("redis://127.0.0.1:{}/", p.port), 0);
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .args(["promote", "--timeout", "30", "--port", &b.port.to_string()])
        .output()
        .expect("run epochdb promote");
    let took = started.elapsed();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}; the primary said: {}", String::from_utf8_lossy(&out.stderr), p.log());
    eprintln!("switchover: {took:?}: {said}");
    let status = p.child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "the old primary: {}", p.log());
    let acked = join_writers(writers, &p);
    let mut c = client(&b);
    for (w, (a, _)) in acked.iter().enumerate() {
        assert!(a.is_some(), "writer {w} had no reply before the switchover");
        let got: Option<u64> = redis::cmd("GET").arg(format!("w{w}")).query(&mut c).unwrap();
        assert!(got >= *a, "writer {w} acked {a:?}, the new primary has {got:?}: {}", b.log());
    }
    let incrs: i64 = acked.iter().map(|a| a.1).sum();
    let total: i64 = redis::cmd("GET").arg("total").query(&mut c).unwrap();
    assert!(total >= incrs, "{incrs} INCRs acknowledged, the new primary has {total}");
    until_it_takes_writes(&b, "after");
    // SIGTERM stops a control-plane node as SHUTDOWN does: status 0.
    let mut b = b;
    let status = b.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "{status} after SIGTERM: {}", b.log());
}

/// Three data nodes: kill -9 of the primary makes one backup the primary,
/// and the other follows it in place (no exit, no restart), in sync with
/// it, serving its writes at its read view. Unless it persisted an epoch
/// the new primary did not (the two backups persist on their own; under
/// `sync` that epoch was never released): then it is refused as diverged,
/// exits with status 3 once out of the in-sync set, and its restart sets
/// its directory aside and rejoins (as a supervisor would restart it).
#[test]
fn the_other_backup_follows_the_new_primary_without_a_restart() {
    let g = Group::three("follow");
    // Together: none serves before a quorum appoints a primary.
    let started: Vec<(Served, String)> = std::thread::scope(|s| {
        let g = &g;
        let starting: Vec<_> = (1..=3).map(|i| s.spawn(move || g.node(i))).collect();
        starting.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let primary = 1 + started.iter().position(|(_, role)| role.contains("as the primary")).expect("a primary");
    let mut nodes: Vec<Served> = started.into_iter().map(|(n, _)| n).collect();
    let others: Vec<usize> = (1..=3).filter(|&i| i != primary).collect();
    wait_all_in_sync(&nodes[primary - 1], &format!("{},{}", others[0], others[1]));
    let acked = kill_while_writing(&mut nodes[primary - 1]);
    // Whichever the group appoints takes writes; the other follows it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (new, follower) = loop {
        let roles: Vec<String> = others.iter().map(|&i| field(&mut client(&nodes[i - 1]), "role")).collect();
        if let Some(k) = roles.iter().position(|r| r == "master") {
            break (others[k], others[1 - k]);
        }
        assert!(Instant::now() < deadline, "no backup was promoted: {roles:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    has_acknowledged(&nodes[new - 1], &acked);
    let port = g.replicate[new - 1].to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let in_place = loop {
        let f = &mut nodes[follower - 1];
        if let Some(status) = f.child.try_wait().unwrap() {
            assert!(status.code() == Some(3) && f.log().contains("refused as diverged"), "{status}: {}", f.log());
            eprintln!("the follower had an epoch the promotion did not keep: restarted");
            nodes[follower - 1] = g.node(follower).0;
            break false;
        }
        let info = redis::Client::open(format!("redis://127.0.0.1:{}/", f.port))
            .and_then(|c| c.get_connection())
            .and_then(|mut c| redis::cmd("INFO").arg("replication").query::<String>(&mut c));
        if info.is_ok_and(|i| i.contains(&format!("master_port:{port}\r\nmaster_link_status:up"))) {
            break true;
        }
        assert!(Instant::now() < deadline, "the follower neither followed nor exited: {}", f.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    wait_in_sync(&nodes[new - 1], follower);
    let f = &mut nodes[follower - 1];
    let mut fc = client(f);
    assert_eq!(field(&mut fc, "master_port"), port, "{}", f.log());
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("GET").arg("after").query::<Option<i64>>(&mut fc).unwrap() != Some(1) {
        assert!(Instant::now() < deadline, "the follower never showed the new primary's write: {}", f.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!in_place || f.log().contains("following it at"), "{}", f.log());
    for i in [new, follower] {
        kill(&mut nodes[i - 1]);
    }
}

/// `epochdb member`: a new witness joins (`witness --join`), the old one
/// is removed and stopped, and kill -9 of the primary still fails over:
/// the backup is elected with the new witness's vote, with every
/// acknowledged write.
#[test]
fn a_witness_is_replaced_and_the_group_still_fails_over() {
    let mut g = Group::start("members");
    let (a, role) = g.node(1);
    let b = g.node(2).0;
    let (mut p, b, backup) = if role.contains("as the primary") { (a, b, 2) } else { (b, a, 1) };
    wait_in_sync(&p, backup);
    let new = free_port();
    let c = |port: u16| format!("127.0.0.1:{port}");
    let witness = g.witness(4, new, &[1, 2, 3], true);
    let (ok, said) = member(&["remove", "3"], &b);
    assert!(!ok && said.contains("at least 3 voters"), "{said}; {}", b.log());
    let (ok, said) = member(&["add", "4", &c(new)], &b);
    assert!(ok && said.contains("the voters are 1,2,3,4"), "{said}; {}", b.log());
    let (ok, said) = member(&["remove", "3"], &p);
    assert!(ok && said.contains("the voters are 1,2,4"), "{said}; {}", p.log());
    let mut old = g.witness.take().expect("the old witness");
    old.kill().unwrap();
    old.wait().unwrap();
    g.witness = Some(witness);

    let acked = kill_while_writing(&mut p);
    has_acknowledged(&b, &acked);
    assert_eq!(field(&mut client(&b), "epochdb_voters"), "1,2,4");
    let mut b = b;
    kill(&mut b);
}

/// A lost data machine replaced: a new data node joins (`serve --join`,
/// `epochdb member add`), comes up as a replica and into the in-sync set;
/// the old backup's machine is lost and it is removed; then kill -9 of
/// the primary makes the new node the primary, with every acknowledged
/// write (its vote and the witness's are the quorum).
#[test]
fn a_new_data_node_replaces_a_lost_backup_and_takes_over() {
    let g = Group::start("join");
    let (a, role) = g.node(1);
    let b = g.node(2).0;
    let (mut p, mut b, backup) = if role.contains("as the primary") { (a, b, 2) } else { (b, a, 1) };
    let primary = 3 - backup;
    wait_in_sync(&p, backup);
    let addr = format!("127.0.0.1:{}", g.control[3]);
    let (mut d, role) = std::thread::scope(|s| {
        let joining = s.spawn(|| g.node(4));
        let (ok, said) = member(&["add", "4", &addr], &p);
        assert!(ok, "{said}{}", p.log());
        joining.join().unwrap()
    });
    assert!(role.contains(&format!("a replica of node {primary}")), "{role}: {}", d.log());
    wait_all_in_sync(&p, &format!("{backup},4"));
    kill(&mut b); // the old backup's machine is lost
    let (ok, said) = member(&["remove", &backup.to_string()], &p);
    assert!(ok && said.contains("the voters are"), "{said}{}", p.log());
    wait_in_sync(&p, 4);

    let acked = kill_while_writing(&mut p);
    has_acknowledged(&d, &acked);
    kill(&mut d);
}

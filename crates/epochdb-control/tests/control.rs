//! Three control-plane nodes on loopback: two data nodes and a witness
//! (and a fourth that joins when a test adds it).

use epochdb_control::{Config, Node, View};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use epochdb_testkit::ports;

fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], ports::free_port()))
}

struct Group {
    dir: PathBuf,
    addrs: BTreeMap<u64, SocketAddr>,
}

impl Group {
    fn new(name: &str) -> Group {
        let dir = std::env::temp_dir().join(format!("epochdb-control-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Group { dir, addrs: (1..=3).map(|i| (i, free_addr())).collect() }
    }

    /// Nodes 1 and 2 hold data; node 3 is the witness.
    fn start(&self, id: u64) -> Node {
        Node::start(self.config(id)).expect("start a node")
    }

    fn config(&self, id: u64) -> Config {
        let mut cfg = Config::new(id, self.addrs[&id], self.dir.join(id.to_string()));
        cfg.peers = self.addrs.iter().filter(|(&i, _)| i != id).map(|(&i, a)| (i, a.to_string())).collect();
        cfg.witness = id >= 3;
        cfg.replicate_addr = format!("127.0.0.1:{}", 7000 + id);
        cfg.secret = Some("s3cret".into());
        cfg
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until `f` holds for `node`'s view.
fn until(node: &Node, what: &str, f: impl Fn(&View) -> bool) -> View {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut v = node.view();
    while !f(&v) {
        assert!(Instant::now() < deadline, "{what}: still {v:?}");
        v = node.wait_change(v.version, Duration::from_millis(50));
    }
    v
}

fn wait_lease(node: &Node, valid: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.lease().is_valid() != valid {
        assert!(Instant::now() < deadline, "lease of node {} never became {valid}", node.view().me);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_data_node_is_appointed_and_an_in_sync_backup_takes_over_with_the_lease() {
    let g = Group::new("failover");
    let mut nodes: BTreeMap<u64, Node> = (1..=3).map(|i| (i, g.start(i))).collect();
    let v = until(&nodes[&3], "a primary", |v| v.cluster.primary != 0);
    let first = v.cluster.primary;
    assert_ne!(first, 3, "the witness never becomes the primary");
    let other = 3 - first;
    assert_eq!(v.cluster.primary_addr, format!("127.0.0.1:{}", 7000 + first));
    wait_lease(&nodes[&first], true);
    assert!(!nodes[&other].lease().is_valid() && !nodes[&3].lease().is_valid(), "one lease");

    // The primary commits its in-sync set; every node learns it.
    nodes[&first].membership().propose(vec![other]);
    for n in nodes.values() {
        until(n, "the in-sync set", |v| v.cluster.in_sync == vec![other]);
    }
    assert_eq!(nodes[&first].view().served, 1, "it records the appointment it serves");

    // The primary's machine is lost: the backup takes over, with a lease.
    let t = Instant::now();
    drop(nodes.remove(&first));
    let v = until(&nodes[&3], "a new primary", |v| v.cluster.primary == other);
    assert_eq!((v.cluster.appointment, v.cluster.in_sync.clone()), (2, vec![]), "it starts with no backups");
    wait_lease(&nodes[&other], true);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "failover took {took:?}");

    // The deposed node comes back: it follows, and knows it once served.
    let back = g.start(first);
    let v = until(&back, "the new primary", |v| v.cluster.primary == other);
    assert_eq!(v.served, 1, "its data is from its own term");
    back.forget_served();
    until(&back, "served forgotten", |v| v.served == 0);
    assert!(!back.lease().is_valid());
}

#[test]
fn a_backup_out_of_the_in_sync_set_is_never_appointed() {
    let g = Group::new("ineligible");
    let mut nodes: BTreeMap<u64, Node> = (1..=3).map(|i| (i, g.start(i))).collect();
    let first = until(&nodes[&3], "a primary", |v| v.cluster.primary != 0).cluster.primary;
    let other = 3 - first;
    wait_lease(&nodes[&first], true);
    // No in-sync set committed: the backup may lack released commits.
    drop(nodes.remove(&first));
    std::thread::sleep(Duration::from_secs(2));
    for n in nodes.values() {
        let v = n.view();
        assert_eq!(v.cluster.primary, first, "node {} sees {v:?}", v.me);
    }
    assert!(!nodes[&other].lease().is_valid());
    // The old primary comes back and is the primary again.
    let back = g.start(first);
    until(&back, "its own appointment", |v| v.cluster.primary == first && v.leader == first);
    wait_lease(&back, true);
    assert_eq!(back.view().cluster.appointment, 1, "the same appointment, not a new one");
}

#[test]
fn a_node_with_the_wrong_secret_is_not_heard() {
    let g = Group::new("secret");
    let a = g.start(1);
    let mut cfg = Config::new(2, g.addrs[&2], g.dir.join("2"));
    cfg.peers = [(1, g.addrs[&1].to_string()), (3, g.addrs[&3].to_string())].into();
    cfg.replicate_addr = "127.0.0.1:7002".into();
    cfg.secret = Some("wrong".into());
    let b = Node::start(cfg).expect("start");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(a.view().cluster.primary, 0, "no quorum: 1 and 2 cannot hear each other");
    assert_eq!(b.view().cluster.primary, 0);
}

/// A connection that never proves it holds the secret is closed after the
/// handshake's few seconds: it cannot hold a node's thread forever.
#[test]
fn a_silent_connection_is_closed_after_the_handshake_time() {
    use std::io::Read;
    let g = Group::new("silent");
    let node = g.start(1);
    let mut sock = std::net::TcpStream::connect(node.addr()).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut challenge = [0u8; 42];
    sock.read_exact(&mut challenge).expect("the challenge");
    assert_eq!(&challenge[..8], b"EPOCHCTL");
    let start = Instant::now();
    let mut rest = [0u8; 1];
    let n = sock.read(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "closed, not answered");
    assert!(start.elapsed() < Duration::from_secs(8), "closed after {:?}", start.elapsed());
}

/// The members change, one voter at a time: a witness joins (it learns
/// the voters from the leader's snapshot) and the old witness is removed;
/// the group then fails over with the new witness's vote, and changes
/// that would leave fewer than 3 voters, remove the primary or add a
/// voter twice are refused.
#[test]
fn a_witness_joins_the_old_one_leaves_and_the_group_fails_over_with_it() {
    let mut g = Group::new("members");
    let mut nodes: BTreeMap<u64, Node> = (1..=3).map(|i| (i, g.start(i))).collect();
    let first = until(&nodes[&3], "a primary", |v| v.cluster.primary != 0).cluster.primary;
    let other = 3 - first;
    wait_lease(&nodes[&first], true);
    nodes[&first].membership().propose(vec![other]);
    until(&nodes[&3], "the in-sync set", |v| v.cluster.in_sync == vec![other] && v.current);
    let e = nodes[&3].remove_member(3).expect_err("3 voters");
    assert!(e.contains("at least 3"), "{e}");
    let e = nodes[&3].add_member(other, "127.0.0.1:1").expect_err("a voter");
    assert!(e.contains("already"), "{e}");

    // Node 4 joins: started first, with the voters as its peers, then added.
    g.addrs.insert(4, free_addr());
    let mut cfg = g.config(4);
    cfg.join = true;
    let joiner = Node::start(cfg).expect("start the joiner");
    assert!(joiner.view().voters.is_empty(), "a joining node begins with no voters");
    nodes[&3].add_member(4, &g.addrs[&4].to_string()).expect("add node 4");
    nodes.insert(4, joiner);
    for n in nodes.values() {
        until(n, "four voters", |v| v.voters == [1, 2, 3, 4] && v.cluster.primary == first && v.current);
    }
    let e = nodes[&first].remove_member(first).expect_err("the primary");
    assert!(e.contains("switch over first"), "{e}");

    // The old witness leaves, and is stopped.
    nodes[&4].remove_member(3).expect("remove node 3");
    for n in nodes.values() {
        until(n, "node 3 removed", |v| v.voters == [1, 2, 4]);
    }
    drop(nodes.remove(&3));
    // Restarted with its flags (which name 3), node 4 keeps the log's voters.
    drop(nodes.remove(&4));
    let mut cfg = g.config(4);
    cfg.join = true;
    nodes.insert(4, Node::start(cfg).expect("restart node 4"));
    until(&nodes[&4], "node 4's voters after a restart", |v| v.voters == [1, 2, 4] && v.current);

    // The primary is lost: the backup needs node 4's vote to take over.
    drop(nodes.remove(&first));
    let v = until(&nodes[&4], "a new primary", |v| v.cluster.primary == other);
    assert_eq!(v.cluster.appointment, 2);
    wait_lease(&nodes[&other], true);
}

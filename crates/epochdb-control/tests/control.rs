//! Three control-plane nodes on loopback: two data nodes and a witness.

use epochdb_control::{Config, Node, View};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
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
        let mut cfg = Config::new(id, self.addrs[&id], self.dir.join(id.to_string()));
        cfg.peers = self.addrs.iter().filter(|(&i, _)| i != id).map(|(&i, a)| (i, a.to_string())).collect();
        cfg.witness = id == 3;
        cfg.replicate_addr = format!("127.0.0.1:{}", 7000 + id);
        cfg.secret = Some("s3cret".into());
        Node::start(cfg).expect("start a node")
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

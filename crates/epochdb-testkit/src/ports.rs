//! Ports for the servers tests start.

/// A port for a server a test starts with a port it must know in advance
/// (a control or replication address its peers are given), free when
/// this returns and not taken by this process before.
///
/// Not one from binding port 0: the kernel hands out that range again, to
/// other servers started with port 0 and to the source ports of outgoing
/// connections, all of which the parallel tests make, so it could be
/// taken between this call and the server's bind (CI once saw `listen on
/// 127.0.0.1:43963: Address already in use`). These come from below the
/// kernel's ephemeral range, in a window set by the process id, in turn.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const WINDOW: u32 = 12_000;
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let start = low.saturating_sub(WINDOW).max(1024);
    if low < start + 1000 {
        // No room below the ephemeral range: take the kernel's choice.
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        return l.local_addr().expect("its address").port();
    }
    let span = low - start;
    let base = std::process::id() % span;
    for _ in 0..span {
        let port = (start + (base + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {start}..{low}");
}

//! How replication connections travel when not as plain TCP: a seam for
//! the server's TLS (`tls-replication`), which the engine does not know.

use std::net::TcpStream;

/// Carries replication connections. Each side hands over the TCP socket
/// it accepted or connected and gets back a socket on which it speaks the
/// replication protocol in the clear, and whose other end the transport
/// relays (a loopback connection). (Unwind-safe, so `Options` stays
/// usable across `catch_unwind`.)
pub trait Transport: Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe {
    /// On a primary, for a backup's accepted connection.
    fn accepted(&self, sock: TcpStream) -> std::io::Result<TcpStream>;
    /// On a backup, for its connection to `primary` (`HOST:PORT` as given).
    fn connected(&self, sock: TcpStream, primary: &str) -> std::io::Result<TcpStream>;
}

impl std::fmt::Debug for dyn Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transport")
    }
}

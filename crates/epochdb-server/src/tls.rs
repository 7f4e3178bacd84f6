//! TLS with Redis's option names: clients on `tls-port`, and with
//! `tls-replication` the connections between a primary and its replicas
//! (rustls on ring). Certificates and keys are read once, at start.
//!
//! A client connection's TLS runs inside its event loop ([`Stream`]). A
//! replication connection is relayed ([`Relay`]): the engine speaks in the
//! clear on one end of a loopback connection, and a thread per connection
//! moves bytes between its other end and the TLS socket, so the engine
//! knows nothing of TLS.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether clients on the TLS port must present a certificate signed by
/// `tls-ca-cert-file` (Redis's `tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthClients {
    /// Required (Redis's default).
    #[default]
    Yes,
    /// Not asked for.
    No,
    /// Checked if presented.
    Optional,
}

impl AuthClients {
    /// `yes`, `no` or `optional`, in either case.
    pub fn parse(text: &str) -> Option<AuthClients> {
        match text.to_ascii_lowercase().as_str() {
            "yes" => Some(AuthClients::Yes),
            "no" => Some(AuthClients::No),
            "optional" => Some(AuthClients::Optional),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
    }
}

/// The TLS settings, by Redis's names.
#[derive(Debug, Clone, Default)]
pub struct TlsConfig {
    /// `tls-port`: a listener for TLS clients beside the plain port (0:
    /// any free port); `None`: none.
    pub port: Option<u16>,
    /// `tls-cert-file`: the server's certificate chain (PEM), also the
    /// client certificate a replica presents to its primary.
    pub cert_file: PathBuf,
    /// `tls-key-file`: its private key (PEM).
    pub key_file: PathBuf,
    /// `tls-ca-cert-file`: the CA certificates (PEM) that client
    /// certificates, and a replica's view of its primary's, must chain to.
    pub ca_cert_file: Option<PathBuf>,
    pub auth_clients: AuthClients,
    /// `tls-replication`: replication connections (`--replicate-listen`,
    /// `--replicaof`) use TLS.
    pub replication: bool,
}

/// The loaded configuration.
pub struct Tls {
    pub config: TlsConfig,
    pub server: Arc<rustls::ServerConfig>,
    /// For a replica's connection to its primary (`None` without a CA
    /// file, which it needs to check the primary).
    pub client: Option<Arc<rustls::ClientConfig>>,
}

impl Tls {
    /// Reads the files and builds the configurations; the error names the
    /// file or setting at fault.
    pub fn load(config: &TlsConfig) -> Result<Tls, String> {
        // Deprecated for lacking post-quantum key exchange, which only the
        // aws-lc-rs provider (a much heavier build) has.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let read_certs = |path: &PathBuf| -> Result<Vec<CertificateDer<'static>>, String> {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!("{}: no certificate in it", path.display()));
            }
            Ok(certs)
        };
        let certs = read_certs(&config.cert_file)?;
        let key = |path: &PathBuf| PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: {e}", path.display()));
        let roots = match &config.ca_cert_file {
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in read_certs(path)? {
                    roots.add(c).map_err(|e| format!("{}: {e}", path.display()))?;
                }
                Some(Arc::new(roots))
            }
            None => None,
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match (config.auth_clients, &roots) {
            (AuthClients::No, _) => builder.with_no_client_auth(),
            (_, None) => return Err("tls-auth-clients yes or optional needs tls-ca-cert-file".into()),
            (auth, Some(roots)) => {
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
                let verifier = if auth == AuthClients::Optional { verifier.allow_unauthenticated() } else { verifier };
                builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
            }
        };
        let server = builder
            .with_single_cert(certs.clone(), key(&config.key_file)?)
            .map_err(|e| format!("{}: {e}", config.key_file.display()))?;
        let client = match roots {
            Some(roots) => Some(Arc::new(
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_client_auth_cert(certs, key(&config.key_file)?)
                    .map_err(|e| format!("{}: {e}", config.key_file.display()))?,
            )),
            None if config.replication => return Err("tls-replication needs tls-ca-cert-file".into()),
            None => None,
        };
        Ok(Tls { config: config.clone(), server: Arc::new(server), client })
    }

    /// The transport a primary's and a replica's replication connections
    /// take, with `tls-replication`.
    pub fn relay(self: &Arc<Tls>) -> Option<Arc<dyn epochdb::Transport>> {
        self.config.replication.then(|| Arc::new(Relay(AssertUnwindSafe(self.clone()))) as Arc<dyn epochdb::Transport>)
    }
}

/// A client connection: plain TCP, or TLS over it.
pub struct Stream {
    pub sock: mio::net::TcpStream,
    pub tls: Option<Box<rustls::ServerConnection>>,
}

impl Stream {
    /// Reads what the client sent (decrypted): `Ok(0)` at its end,
    /// `WouldBlock` when nothing more has arrived.
    pub fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else { return self.sock.read(buf) };
        loop {
            match tls.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => return r,
            }
            if tls.read_tls(&mut self.sock)? == 0 {
                return Ok(0);
            }
            if let Err(e) = tls.process_new_packets() {
                // Tell the peer why (an alert) before the connection closes.
                let _ = tls.write_tls(&mut self.sock);
                return Err(std::io::Error::new(ErrorKind::InvalidData, e));
            }
        }
    }

    /// Writes some of `buf` (encrypted); `WouldBlock` when the socket
    /// takes nothing more now.
    pub fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else { return self.sock.write(buf) };
        let n = tls.writer().write(buf)?;
        let drained = self.flush_tls()?;
        match (n, drained) {
            (0, false) => Err(ErrorKind::WouldBlock.into()),
            (0, true) => Ok(0),
            (n, _) => Ok(n),
        }
    }

    /// Sends the TLS records rustls holds (handshake messages, encrypted
    /// replies); `Ok(false)` if the socket would take no more now.
    pub fn flush_tls(&mut self) -> std::io::Result<bool> {
        let Some(tls) = self.tls.as_deref_mut() else { return Ok(true) };
        while tls.wants_write() {
            match tls.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Whether a short read means the socket is drained (edge-triggered
    /// polling): not with TLS, where a record may hold less than asked.
    pub fn short_read_drains(&self) -> bool {
        self.tls.is_none()
    }

    /// Ends TLS politely before the connection closes.
    pub fn close_notify(&mut self) {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.send_close_notify();
            let _ = self.flush_tls();
        }
    }
}

/// `tls-replication`: each replication connection is relayed between a
/// loopback connection the engine speaks on and the TLS socket. (Unwind
/// safe: the configurations are not changed after loading, and rustls's
/// session caches lock what they share.)
struct Relay(AssertUnwindSafe<Arc<Tls>>);

impl epochdb::Transport for Relay {
    fn accepted(&self, sock: TcpStream) -> std::io::Result<TcpStream> {
        let conn = rustls::ServerConnection::new(self.0.server.clone()).map_err(std::io::Error::other)?;
        relay(sock, conn.into())
    }

    fn connected(&self, sock: TcpStream, primary: &str) -> std::io::Result<TcpStream> {
        let client = self.0.client.clone().ok_or_else(|| std::io::Error::other("tls-replication needs a CA file"))?;
        let host = primary.rsplit_once(':').map_or(primary, |(h, _)| h).trim_matches(['[', ']']);
        let name = ServerName::try_from(host.to_string()).map_err(std::io::Error::other)?;
        let conn = rustls::ClientConnection::new(client, name).map_err(std::io::Error::other)?;
        relay(sock, conn.into())
    }
}

/// Plaintext held for one side before the relay stops reading the other.
const RELAY_HOLD: usize = 4 << 20;

/// Starts relaying `net` (TLS by `conn`) and returns the clear end.
fn relay(net: TcpStream, conn: rustls::Connection) -> std::io::Result<TcpStream> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let clear = TcpStream::connect(listener.local_addr()?)?;
    // Another local process could connect to the port first: take only
    // the connection whose peer is ours.
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let inner = loop {
        match listener.accept() {
            Ok((s, peer)) if peer == clear.local_addr()? => break s,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    };
    std::thread::Builder::new().name("epochdb-tls-relay".into()).spawn(move || {
        if let Err(e) = pump(net, conn, inner) {
            ::log::warn!("replication over TLS: {e}");
        }
    })?;
    Ok(clear)
}

/// Moves bytes both ways until either side ends: decrypted from `net` to
/// `clear`, and encrypted from `clear` to `net`.
fn pump(mut net: TcpStream, mut conn: rustls::Connection, mut clear: TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    for s in [&net, &clear] {
        s.set_nonblocking(true)?;
        s.set_nodelay(true)?;
    }
    let (mut to_clear, mut to_net, mut buf) = (Vec::new(), Vec::new(), vec![0u8; 64 << 10]);
    let (mut net_open, mut clear_open, mut notified) = (true, true, false);
    loop {
        // The network into rustls, and its plaintext out.
        if net_open && to_clear.len() < RELAY_HOLD {
            match conn.read_tls(&mut net) {
                Ok(0) => net_open = false,
                Ok(_) => {
                    if let Err(e) = conn.process_new_packets() {
                        let _ = conn.write_tls(&mut net); // the alert
                        return Err(std::io::Error::new(ErrorKind::InvalidData, e));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            loop {
                match conn.reader().read(&mut buf) {
                    Ok(0) => {
                        net_open = false;
                        break;
                    }
                    Ok(n) => to_clear.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
        while !to_clear.is_empty() {
            match clear.write(&to_clear) {
                Ok(n) => drop(to_clear.drain(..n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        // The engine's plaintext into rustls (which takes a bounded amount
        // at a time, and none past its limit before the handshake ends).
        if clear_open && to_net.len() < RELAY_HOLD {
            match clear.read(&mut buf) {
                Ok(0) => clear_open = false,
                Ok(n) => to_net.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if !to_net.is_empty() {
            let n = conn.writer().write(&to_net)?;
            to_net.drain(..n);
        }
        if !clear_open && to_net.is_empty() && !notified {
            conn.send_close_notify();
            notified = true;
        }
        while conn.wants_write() {
            match conn.write_tls(&mut net) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if (!net_open && to_clear.is_empty()) || (notified && !conn.wants_write()) {
            let _ = clear.shutdown(std::net::Shutdown::Both);
            let _ = net.shutdown(std::net::Shutdown::Both);
            if conn.is_handshaking() {
                return Err(std::io::Error::other("no TLS handshake: is the other side set for --tls-replication?"));
            }
            return Ok(());
        }
        // What rustls would take now, without waiting on either socket.
        if !to_net.is_empty() && !conn.wants_write() && !conn.is_handshaking() {
            continue;
        }
        let wanted = |on: bool, flag: libc::c_short| if on { flag } else { 0 };
        let mut fds = [
            libc::pollfd {
                fd: net.as_raw_fd(),
                events: wanted(net_open && to_clear.len() < RELAY_HOLD, libc::POLLIN)
                    | wanted(conn.wants_write(), libc::POLLOUT),
                revents: 0,
            },
            libc::pollfd {
                fd: clear.as_raw_fd(),
                events: wanted(clear_open && to_net.len() < RELAY_HOLD, libc::POLLIN)
                    | wanted(!to_clear.is_empty(), libc::POLLOUT),
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd entries, for descriptors we own.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
    }
}

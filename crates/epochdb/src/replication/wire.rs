//! The replication wire protocol (FORMAT.md, "Replication stream").
//!
//! Every message is a frame: `u32` length of the body, the body (a kind
//! byte, then its fields, little-endian), and the body's CRC32C. A reader
//! checks the length against [`MAX_FRAME`] before allocating and the CRC
//! before decoding, so a hostile or damaged stream is a typed error, never
//! a panic or an oversized allocation.
//!
//! The handshake proves both ends hold the same shared secret without
//! sending it: each side sends a fresh random nonce and answers the other's
//! with an HMAC-SHA256 over both nonces ([`proof`]), so a recorded
//! handshake cannot be replayed. (The stream itself is not encrypted.)

use crate::error::{Error, Result};
use std::io::{Read, Write};

/// The first bytes of a backup's hello.
pub const MAGIC: &[u8; 8] = b"EPOCHREP";
/// The protocol version this build speaks.
pub const VERSION: u16 = 6;

/// How a refusal's reason begins when the backup diverged
/// (`Backup::diverged`).
pub const DIVERGED: &str = "diverged: ";
/// The largest frame body: the largest log block and its header. Bodies
/// are read as their bytes arrive, so a length alone allocates nothing.
pub const MAX_FRAME: usize = crate::durability::frame::MAX_PAYLOAD + 64;

/// A handshake nonce or proof.
pub type Nonce = [u8; 32];

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Primary to backup, first: its protocol version and a nonce.
    Challenge { version: u16, nonce: Nonce },
    /// Backup to primary, the answer: its version, what it has persisted,
    /// its own nonce, its proof of the secret over both nonces, and its
    /// node id in the control plane (0: none).
    Hello {
        version: u16,
        pepoch: u64,
        top: u64,
        term: u32,
        term_start: u64,
        term_id: u64,
        nonce: Nonce,
        proof: Nonce,
        node: u64,
    },
    /// Primary to backup, the answer to a hello it accepts: how many log
    /// streams follow, its own proof of the secret, and the manifest
    /// (catalog and void epochs).
    Welcome { streams: u16, proof: Nonce, manifest: Vec<u8> },
    /// Primary to backup: why it will not serve this backup; then it closes.
    Refuse { reason: String },
    /// A sealed log block of `stream`, as the primary wrote it, holding
    /// epochs `lo..=hi`.
    Block { stream: u16, lo: u64, hi: u64, block: Vec<u8> },
    /// `stream` has sent every block of epochs `<= epoch` (SiloR's `d_l`).
    Seal { stream: u16, epoch: u64 },
    /// The manifest changed (a table was created).
    Manifest { manifest: Vec<u8> },
    /// Backup to primary: every epoch `<= pepoch` is on its disk.
    Ack { pepoch: u64 },
    /// Backup to primary: its read view reached `epoch` (for lag reports).
    Replayed { epoch: u64 },
    /// Primary to backup: commits of epochs `<= epoch` have been released
    /// (reported to clients). A hot standby shows nothing newer.
    Released { epoch: u64 },
}

const HELLO: u8 = 1;
const WELCOME: u8 = 2;
const REFUSE: u8 = 3;
const BLOCK: u8 = 4;
const SEAL: u8 = 5;
const MANIFEST: u8 = 6;
const ACK: u8 = 7;
const RELEASED: u8 = 8;
const CHALLENGE: u8 = 9;
const REPLAYED: u8 = 10;

fn protocol(what: impl Into<String>) -> Error {
    Error::Replication(what.into())
}

impl Msg {
    /// Appends this message's frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = begin(out);
        match self {
            Msg::Challenge { version, nonce } => {
                out.push(CHALLENGE);
                out.extend_from_slice(MAGIC);
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(nonce);
            }
            Msg::Hello { version, pepoch, top, term, term_start, term_id, nonce, proof, node } => {
                out.push(HELLO);
                out.extend_from_slice(MAGIC);
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&pepoch.to_le_bytes());
                out.extend_from_slice(&term.to_le_bytes());
                out.extend_from_slice(&term_start.to_le_bytes());
                out.extend_from_slice(&term_id.to_le_bytes());
                out.extend_from_slice(&top.to_le_bytes());
                out.extend_from_slice(nonce);
                out.extend_from_slice(proof);
                out.extend_from_slice(&node.to_le_bytes());
            }
            Msg::Welcome { streams, proof, manifest } => {
                out.push(WELCOME);
                out.extend_from_slice(&streams.to_le_bytes());
                out.extend_from_slice(proof);
                out.extend_from_slice(manifest);
            }
            Msg::Refuse { reason } => {
                out.push(REFUSE);
                out.extend_from_slice(reason.as_bytes());
            }
            Msg::Block { stream, lo, hi, block } => block_body(out, *stream, *lo, *hi, block),
            Msg::Seal { stream, epoch } => {
                out.push(SEAL);
                out.extend_from_slice(&stream.to_le_bytes());
                out.extend_from_slice(&epoch.to_le_bytes());
            }
            Msg::Manifest { manifest } => {
                out.push(MANIFEST);
                out.extend_from_slice(manifest);
            }
            Msg::Ack { pepoch } => {
                out.push(ACK);
                out.extend_from_slice(&pepoch.to_le_bytes());
            }
            Msg::Released { epoch } => {
                out.push(RELEASED);
                out.extend_from_slice(&epoch.to_le_bytes());
            }
            Msg::Replayed { epoch } => {
                out.push(REPLAYED);
                out.extend_from_slice(&epoch.to_le_bytes());
            }
        }
        finish(out, start);
    }

    /// Decodes one frame body (kind byte and fields).
    pub fn decode(body: &[u8]) -> Result<Msg> {
        let (&kind, rest) = body.split_first().ok_or_else(|| protocol("an empty frame"))?;
        let mut f = Fields { kind, rest };
        let msg = match kind {
            CHALLENGE | HELLO => {
                if f.take(8)? != MAGIC {
                    return Err(protocol("not an epochdb replication handshake"));
                }
                let version = f.u16()?;
                if kind == CHALLENGE {
                    Msg::Challenge { version, nonce: f.nonce()? }
                } else {
                    let (pepoch, term, term_start) = (f.u64()?, f.u32()?, f.u64()?);
                    // (Version 4 had no id; its hello is refused for its version.)
                    let (term_id, top) = if version >= 5 { (f.u64()?, f.u64()?) } else { (0, 0) };
                    let (nonce, proof) = (f.nonce()?, f.nonce()?);
                    Msg::Hello { version, pepoch, top, term, term_start, term_id, nonce, proof, node: f.u64()? }
                }
            }
            WELCOME => Msg::Welcome { streams: f.u16()?, proof: f.nonce()?, manifest: f.rest() },
            REFUSE => Msg::Refuse { reason: String::from_utf8_lossy(&f.rest()).into_owned() },
            BLOCK => {
                let (stream, lo, hi) = f.block_head()?;
                Msg::Block { stream, lo, hi, block: f.rest() }
            }
            SEAL => Msg::Seal { stream: f.u16()?, epoch: f.u64()? },
            MANIFEST => Msg::Manifest { manifest: f.rest() },
            ACK => Msg::Ack { pepoch: f.u64()? },
            RELEASED => Msg::Released { epoch: f.u64()? },
            REPLAYED => Msg::Replayed { epoch: f.u64()? },
            _ => return Err(protocol(format!("unknown frame kind {kind}"))),
        };
        if !f.rest.is_empty() {
            return Err(protocol(format!("{} extra bytes after a frame of kind {kind}", f.rest.len())));
        }
        Ok(msg)
    }
}

/// The fields of a frame body, read in order.
struct Fields<'a> {
    kind: u8,
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(protocol(format!("a frame of kind {} cut short", self.kind)));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u16(&mut self) -> Result<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    fn nonce(&mut self) -> Result<Nonce> {
        self.take(32).map(|b| b.try_into().unwrap_or([0; 32]))
    }

    /// A block frame's stream and epochs.
    fn block_head(&mut self) -> Result<(u16, u64, u64)> {
        Ok((self.u16()?, self.u64()?, self.u64()?))
    }

    /// The remaining bytes, owned.
    fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.rest).to_vec()
    }
}

/// Starts a frame at the end of `out`: room for its length.
fn begin(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0; 4]);
    out.len() - 4
}

/// Ends the frame begun at `start`: its length, then its CRC.
fn finish(out: &mut Vec<u8>, start: usize) {
    let body_len = out.len() - start - 4;
    out[start..start + 4].copy_from_slice(&(body_len as u32).to_le_bytes());
    let crc = crate::crc32c::checksum(&out[start + 4..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

fn block_body(out: &mut Vec<u8>, stream: u16, lo: u64, hi: u64, block: &[u8]) {
    out.push(BLOCK);
    out.extend_from_slice(&stream.to_le_bytes());
    out.extend_from_slice(&lo.to_le_bytes());
    out.extend_from_slice(&hi.to_le_bytes());
    out.extend_from_slice(block);
}

/// The bytes a block's frame takes beyond the block.
pub const BLOCK_FRAME_EXTRA: usize = 27;

/// The frame of `Msg::Block`, built from a borrowed block (one copy) in
/// `out`, whose bytes are replaced (a recycled buffer, or a new one).
pub fn block_frame(mut out: Vec<u8>, stream: u16, lo: u64, hi: u64, block: &[u8]) -> Vec<u8> {
    out.clear();
    out.reserve_exact(block.len() + BLOCK_FRAME_EXTRA);
    let start = begin(&mut out);
    block_body(&mut out, stream, lo, hi, block);
    finish(&mut out, start);
    debug_assert_eq!(out.len(), block.len() + BLOCK_FRAME_EXTRA);
    out
}

/// A random number (a promotion's id).
pub fn random_u64() -> Result<u64> {
    let n = nonce()?;
    Ok(u64::from_le_bytes(n[..8].try_into().expect("8 bytes")))
}

/// A fresh random nonce (getrandom(2)).
pub fn nonce() -> Result<Nonce> {
    let mut n = [0u8; 32];
    let mut got = 0;
    while got < n.len() {
        // SAFETY: writes at most `n.len() - got` bytes into `n[got..]`.
        let r = unsafe { libc::getrandom(n[got..].as_mut_ptr().cast(), n.len() - got, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(protocol(format!("getrandom: {e}")));
            }
        } else {
            got += r as usize;
        }
    }
    Ok(n)
}

/// Which side a proof is from: a backup's proof cannot pass for a
/// primary's.
#[derive(Debug, Clone, Copy)]
pub enum Side {
    Primary,
    Backup,
}

/// `HMAC-SHA256(secret, side || primary nonce || backup nonce)`.
pub fn proof(secret: &[u8], side: Side, primary: &Nonce, backup: &Nonce) -> Nonce {
    use hmac::{Mac, SimpleHmac};
    let mut mac = <SimpleHmac<sha2::Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(match side {
        Side::Primary => b"epochdb primary",
        Side::Backup => b"epochdb backup\0",
    });
    mac.update(primary);
    mac.update(backup);
    mac.finalize().into_bytes().into()
}

/// Whether `given` is the proof expected (compared in constant time).
pub fn verify(secret: &[u8], side: Side, primary: &Nonce, backup: &Nonce, given: &Nonce) -> bool {
    let want = proof(secret, side, primary, backup);
    want.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Writes one message.
pub fn send(w: &mut impl Write, msg: &Msg) -> Result<()> {
    let mut out = Vec::new();
    msg.encode(&mut out);
    w.write_all(&out).map_err(|e| protocol(format!("send: {e}")))
}

/// Reads one message; `Ok(None)` at a clean end of stream (between frames).
pub fn recv(r: &mut impl Read, body: &mut Vec<u8>) -> Result<Option<Msg>> {
    recv_at_most(r, body, MAX_FRAME)
}

/// The largest handshake frame: a peer not yet authenticated gets no more.
pub const MAX_HANDSHAKE: usize = 256;

/// [`recv`] of a frame of at most `max` bytes (a handshake's).
pub fn recv_at_most(r: &mut impl Read, body: &mut Vec<u8>, max: usize) -> Result<Option<Msg>> {
    let mut len = [0u8; 4];
    if !read_exact_or_end(r, &mut len)? {
        return Ok(None);
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > max {
        return Err(protocol(format!("a frame of {len} bytes (at most {max})")));
    }
    body.clear();
    // At once, not by doubling as it reads; past a usual block's size,
    // only as the bytes arrive (a length is a claim until then).
    body.reserve_exact((len + 4).min(4 << 20));
    let got = r.take(len as u64 + 4).read_to_end(body).map_err(|e| protocol(format!("receive: {e}")))?;
    if got < len + 4 {
        return Err(protocol("the stream ended inside a frame"));
    }
    let crc = u32::from_le_bytes([body[len], body[len + 1], body[len + 2], body[len + 3]]);
    if crate::crc32c::checksum(&body[..len]) != crc {
        return Err(protocol("a frame checksum mismatch"));
    }
    if body[0] == BLOCK {
        // The block takes `body` itself, moved down over the head, not a
        // copy in new memory: the receiver hands back a recycled buffer
        // (`Replay::spare`), so a backup's blocks do not fault in fresh
        // pages (5.7% of its CPU, mostly the kernel zeroing them).
        let mut f = Fields { kind: BLOCK, rest: &body[1..len] };
        let (stream, lo, hi) = f.block_head()?;
        let head = len - f.rest.len();
        body.truncate(len);
        body.drain(..head);
        return Ok(Some(Msg::Block { stream, lo, hi, block: std::mem::take(body) }));
    }
    Msg::decode(&body[..len]).map(Some)
}

/// Fills `buf`; false if the stream ended before its first byte.
fn read_exact_or_end(r: &mut impl Read, buf: &mut [u8]) -> Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(protocol("the stream ended inside a frame")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(protocol(format!("receive: {e}"))),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hello with these epochs and history `(term, term_start, term_id)`.
    fn hello(pepoch: u64, top: u64, (term, term_start, term_id): (u32, u64, u64)) -> Msg {
        let (nonce, proof) = ([1; 32], [2; 32]);
        Msg::Hello { version: VERSION, pepoch, top, term, term_start, term_id, nonce, proof, node: 3 }
    }

    fn all() -> Vec<Msg> {
        vec![
            Msg::Challenge { version: VERSION, nonce: [3; 32] },
            hello(7, 8, (2, 9, 11)),
            Msg::Welcome { streams: 2, proof: [4; 32], manifest: vec![1, 2, 3] },
            Msg::Refuse { reason: "behind".into() },
            Msg::Block { stream: 1, lo: 3, hi: 4, block: vec![9; 100] },
            Msg::Seal { stream: 0, epoch: 12 },
            Msg::Manifest { manifest: vec![] },
            Msg::Ack { pepoch: u64::MAX },
            Msg::Released { epoch: 41 },
            Msg::Replayed { epoch: 40 },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        let mut out = Vec::new();
        for m in all() {
            m.encode(&mut out);
        }
        let mut r = &out[..];
        let mut body = Vec::new();
        for m in all() {
            assert_eq!(recv(&mut r, &mut body).expect("a valid frame"), Some(m));
        }
        assert_eq!(recv(&mut r, &mut body).expect("a clean end"), None);
    }

    #[test]
    fn damaged_or_hostile_frames_are_errors_not_panics() {
        let mut good = Vec::new();
        Msg::Block { stream: 0, lo: 1, hi: 2, block: vec![5; 40] }.encode(&mut good);
        let mut body = Vec::new();
        // Every flipped byte and every truncation is an error (or, for a
        // cut at a frame boundary, a clean end).
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x41;
            assert!(recv(&mut &bad[..], &mut body).is_err(), "flip at {i}");
            let cut = &good[..i];
            assert!(recv(&mut &cut[..], &mut body).map_or(true, |m| m.is_none() && i == 0), "cut at {i}");
        }
        // A huge length is refused before anything is allocated.
        let huge = [0xFF, 0xFF, 0xFF, 0x7F, 1];
        assert!(recv(&mut &huge[..], &mut body).is_err());
        assert!(body.capacity() < MAX_FRAME);
        // Random bytes never panic.
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let bytes = rng.bytes(64);
            let _ = recv(&mut &bytes[..], &mut body);
            let _ = Msg::decode(&bytes);
        }
    }

    #[test]
    fn a_handshake_frame_is_small_and_proofs_bind_secret_side_and_nonces() {
        let mut big = Vec::new();
        Msg::Manifest { manifest: vec![0; MAX_HANDSHAKE] }.encode(&mut big);
        let mut body = Vec::new();
        assert!(recv_at_most(&mut &big[..], &mut body, MAX_HANDSHAKE).is_err());
        let mut greeting = Vec::new();
        hello(1, 1, (0, 0, 0)).encode(&mut greeting);
        assert!(recv_at_most(&mut &greeting[..], &mut body, MAX_HANDSHAKE).is_ok_and(|m| m.is_some()));
        let (p, b) = ([3u8; 32], [4u8; 32]);
        let good = proof(b"s", Side::Backup, &p, &b);
        assert!(verify(b"s", Side::Backup, &p, &b, &good));
        assert!(!verify(b"t", Side::Backup, &p, &b, &good), "another secret");
        assert!(!verify(b"s", Side::Primary, &p, &b, &good), "the other side's proof");
        assert!(!verify(b"s", Side::Backup, &b, &p, &good), "other nonces");
        assert_ne!(nonce().expect("nonce"), nonce().expect("nonce"));
    }
}

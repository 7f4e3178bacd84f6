//! A connection's state, apart from the server's: its buffers, parser
//! and held replies, its database, user and permissions, its MULTI queue
//! and WATCHed keys, and what it is blocked on.

use crate::pubsub::Space;
use crate::resp::{Args, Out, Parser};
use crate::shared::ClientInfo;
use crate::tls::Stream;
use epochdb::Tid;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// Bytes read per `read` call (at least).
pub(crate) const READ_CHUNK: usize = 16 * 1024;
/// An empty read buffer larger than this (after a big request) is cut
/// back to [`READ_CHUNK`], as Redis shrinks idle query buffers.
const READ_KEEP: usize = 1 << 20;

/// A WATCHed key: its database, name and the version seen.
pub type Watched = (usize, Vec<u8>, (bool, Option<Tid>));

/// A client's unparsed input. The buffer stays zeroed past what was read,
/// so a read goes into it as it is: zeroing 16 KiB before every read (a
/// `Vec` truncated and resized) was 9% of a loop's time at `-c 50 -P 1`.
#[derive(Default)]
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    /// Bytes of `buf` read and not yet consumed, from its start.
    len: usize,
}

impl ReadBuf {
    pub(crate) fn filled(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Room for at least `want` more bytes (zeroed only when it grows),
    /// in a buffer with capacity for `expect` more: the rest of a bulk
    /// string whose length has arrived. Its capacity is taken at once,
    /// exactly (as Redis does for a big argument), so the buffer is never
    /// copied as the bulk arrives and never grows past it; only what is
    /// zeroed and read into becomes resident.
    pub(crate) fn room(&mut self, want: usize, expect: usize) -> &mut [u8] {
        let cap = self.len + expect.max(want);
        if self.buf.capacity() < cap {
            self.buf.reserve_exact(cap - self.buf.len());
        }
        if self.buf.len() < self.len + want {
            self.buf.resize(self.len + want, 0);
        }
        &mut self.buf[self.len..]
    }

    /// `n` bytes were read into [`ReadBuf::room`].
    pub(crate) fn add(&mut self, n: usize) {
        self.len += n;
    }

    /// Drops the first `n` bytes, parsed.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
        if self.len == 0 && self.buf.capacity() > READ_KEEP {
            crate::resp::free_buffer(std::mem::replace(&mut self.buf, vec![0; READ_CHUNK]));
        }
    }
}

impl Drop for ReadBuf {
    fn drop(&mut self) {
        crate::resp::free_buffer(std::mem::take(&mut self.buf));
    }
}

/// A connection's state.
pub struct Client {
    pub stream: Stream,
    pub info: Arc<ClientInfo>,
    pub(crate) rbuf: ReadBuf,
    pub(crate) parser: Parser,
    pub(crate) args: Args,
    pub out: Vec<u8>,
    pub(crate) sent: usize,
    /// `(offset, epoch)`: output from `offset` on waits until `epoch` is
    /// durable. Offsets and epochs both grow.
    pub(crate) holds: VecDeque<(usize, u64)>,
    pub db: usize,
    pub resp3: bool,
    /// Authenticated user; `None` until AUTH when a password is required.
    pub user: Option<String>,
    pub allowed: Arc<Vec<bool>>,
    pub acl_generation: u64,
    pub multi: Option<Vec<(usize, Args)>>,
    pub multi_failed: bool,
    pub watched: Vec<Watched>,
    /// The epoch of this client's last write (WAIT, WAITAOF).
    pub last_write_epoch: u64,
    /// In WAIT or WAITAOF: nothing more of its input runs until it is
    /// answered.
    pub blocked: Option<Blocked>,
    /// Its pub/sub subscriptions.
    pub subs: Subscriptions,
    /// CLIENT REPLY: whether its commands' replies are sent.
    pub reply: Reply,
    pub close_after_reply: bool,
    pub(crate) closed: bool,
    pub(crate) writable: bool,
}

/// CLIENT REPLY's modes: replies sent, none sent, or the next one
/// dropped. Pub/sub messages and RESP3 pushes go out whatever the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    On,
    Off,
    /// The next command's reply is dropped (SKIP's own reply too).
    Skip,
    /// Set by the loop after SKIP's own command: drop the next reply.
    SkipNext,
}

/// A client's channels, patterns and shard channels, in the order it
/// subscribed.
#[derive(Debug, Default)]
pub struct Subscriptions {
    pub channels: Vec<Vec<u8>>,
    pub patterns: Vec<Vec<u8>>,
    pub shard: Vec<Vec<u8>>,
}

impl Subscriptions {
    /// The list for one space.
    pub fn of(&mut self, space: Space) -> &mut Vec<Vec<u8>> {
        match space {
            Space::Channel => &mut self.channels,
            Space::Pattern => &mut self.patterns,
            Space::Shard => &mut self.shard,
        }
    }

    /// Channels and patterns (the count SUBSCRIBE replies; shard channels
    /// are counted apart, as in Redis).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    pub fn any(&self) -> bool {
        self.count() + self.shard.len() > 0
    }
}

/// What a blocked client's reply waits for; its later input waits behind
/// it, as in Redis.
#[derive(Debug, Clone)]
pub enum Blocked {
    /// WAIT or WAITAOF.
    Acks(AckWait),
    /// SAVE: until the database has installed this many checkpoints since
    /// it opened (one that began after SAVE arrived).
    Save { installed: u64 },
    /// A blocking pop (BLPOP, BLMOVE, ...), tried again until it finds
    /// something or its time is up.
    Pop(PopWait),
}

/// A client in a blocking pop: command `cmd` (its index in the command
/// table) with `args`, until `deadline` (`None`: no limit); `ticket`, its
/// place among the waiters (`Shared::waiters`).
#[derive(Debug, Clone)]
pub struct PopWait {
    pub cmd: usize,
    pub args: Args,
    pub deadline: Option<Instant>,
    pub ticket: u64,
}

/// A client in WAIT or WAITAOF: it wants `replicas` backups to have
/// acknowledged `epoch` (its last write), until `deadline` (`None`: no
/// limit).
#[derive(Debug, Clone, Copy)]
pub struct AckWait {
    pub epoch: u64,
    pub replicas: usize,
    pub deadline: Option<Instant>,
    /// WAITAOF's: whether `epoch` must also be durable here (numlocal);
    /// `None` for WAIT.
    pub local: Option<bool>,
}

impl AckWait {
    /// The reply if the wait is over (enough acknowledgements, or the
    /// deadline passed), else `None`. `acked`: each backup's acknowledged
    /// epoch (`None`: no replication, so none will come); `durable`: the
    /// epoch durable here (`None`: no logging).
    pub fn answer(&self, acked: Option<&[u64]>, durable: Option<u64>, now: Instant) -> Option<(Option<i64>, i64)> {
        let count = acked.map_or(0, |a| a.iter().filter(|&&e| e >= self.epoch).count());
        let local = durable.is_some_and(|d| d >= self.epoch);
        let done = (count >= self.replicas || acked.is_none()) && (self.local != Some(true) || local);
        (done || self.deadline.is_some_and(|d| now >= d)).then(|| (self.local.map(|_| local as i64), count as i64))
    }
}

impl Client {
    /// A new connection of `user` (none: not authenticated yet), with the
    /// permissions of `allowed` as of ACL generation `acl_generation`.
    pub fn new(
        stream: Stream,
        info: Arc<ClientInfo>,
        user: Option<String>,
        allowed: Arc<Vec<bool>>,
        acl_generation: u64,
    ) -> Client {
        Client {
            stream,
            info,
            rbuf: ReadBuf::default(),
            parser: Parser::default(),
            args: Args::default(),
            out: Vec::new(),
            sent: 0,
            holds: VecDeque::new(),
            db: 0,
            resp3: false,
            user,
            allowed,
            acl_generation,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            last_write_epoch: 0,
            blocked: None,
            subs: Subscriptions::default(),
            reply: Reply::On,
            close_after_reply: false,
            closed: false,
            writable: true,
        }
    }

    pub fn out(&mut self) -> Out<'_> {
        Out { buf: &mut self.out, resp3: self.resp3 }
    }

    /// Holds output from here on until `epoch` is durable.
    pub fn hold_from(&mut self, offset: usize, epoch: u64) {
        match self.holds.back_mut() {
            Some((_, e)) if *e >= epoch => {}
            _ => self.holds.push_back((offset, epoch)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_buffer_keeps_what_is_not_consumed_and_shrinks_when_empty() {
        let mut b = ReadBuf::default();
        let room = b.room(READ_CHUNK, 0);
        assert!(room.len() >= READ_CHUNK);
        room[..5].copy_from_slice(b"hello");
        b.add(5);
        b.consume(2);
        assert_eq!(b.filled(), b"llo");
        // Growing for a big request keeps the bytes before it.
        let room = b.room(2 * READ_KEEP, 0);
        room[..2].copy_from_slice(b"!!");
        b.add(2);
        assert_eq!(b.filled(), b"llo!!");
        b.consume(3);
        assert_eq!(b.filled(), b"!!");
        assert!(b.buf.len() > READ_KEEP, "not cut back while it holds bytes");
        b.consume(2);
        assert_eq!(b.filled(), b"");
        assert_eq!(b.buf.len(), READ_CHUNK, "cut back once empty");
    }

    #[test]
    fn a_read_buffer_takes_a_declared_bulk_at_once_and_zeroes_only_what_it_reads_into() {
        let mut b = ReadBuf::default();
        let expect = 64 * READ_CHUNK;
        for i in 0..64 {
            let room = b.room(READ_CHUNK, expect - i * READ_CHUNK);
            assert_eq!(room.len(), READ_CHUNK, "zeroed only as far as the next read");
            b.add(READ_CHUNK);
            assert_eq!(b.buf.capacity(), expect, "the bulk's room, exactly, from the start");
        }
    }
}

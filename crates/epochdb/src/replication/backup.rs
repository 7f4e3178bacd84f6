//! The backup's side: receive the primary's streams into a data directory
//! of our own.
//!
//! Blocks are checked (CRC, epochs) and appended, byte for byte, to the
//! backup's `data.log`; at each seal that raises `min(seal of each stream)`
//! the backup syncs its log, then its pepoch file, and only then
//! acknowledges that epoch. The directory is always a valid data directory:
//! `epochdb recover` (or `Database::open`) on it is a promotion by hand.
//! The tail above the backup's pepoch is kept when it restarts (the primary
//! sends those epochs again, or names them void in its manifest).
//!
//! The backup is also a hot standby: its directory is recovered into a
//! read-only [`crate::Database`], and `standby.rs` replays each persisted,
//! released epoch into it for snapshot reads. With checkpointing options
//! the standby checkpoints its memory into the directory, as a primary
//! does, and deletes the log files below it (`durability/checkpoint.rs`),
//! so the backup's log does not grow without end.

use super::rules;
use super::standby::{Replay, Replayer, StandbyStatus};
use super::wire::{self, Msg};
use crate::durability::datadir;
use crate::durability::datadir::manifest::Manifest;
use crate::durability::frame;
use crate::durability::log::lock;
use crate::durability::log::logger::{LogFile, PepochFile, Rotation};
use crate::durability::Store;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use crate::txn::{ReadView, Shared};
use std::io::BufRead;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How to run a backup.
#[derive(Debug, Clone)]
pub struct BackupOptions {
    /// The backup's data directory (created if missing). It must not be
    /// another database's: a backup only ever holds its primary's log.
    pub data_dir: PathBuf,
    /// The primary's replication address (`host:port`) at start
    /// ([`crate::Backup::follow`] moves it).
    pub primary: String,
    /// Wait between attempts to reach the primary.
    pub retry: Duration,
    /// With no message for this long, the primary is taken for gone and
    /// the backup connects again (the primary seals every epoch).
    pub idle_timeout: Duration,
    /// The primary's shared secret ([`crate::PrimaryOptions::secret`]).
    pub secret: Option<String>,
    /// Bytes of received, unreplayed blocks held in memory (default 256
    /// MiB). Past it the receiver waits for replay, or, while replay may
    /// not start yet (a new backup catching up before its first seal),
    /// leaves blocks in its log file and replay reads them back.
    pub replay_memory: usize,
    /// This backup's node id in a control plane (`epochdb-control`), told
    /// to the primary so its in-sync set can name it; 0: none.
    pub node: u64,
    /// How the connection to the primary travels (the server's TLS);
    /// `None`: plain TCP.
    pub transport: Option<std::sync::Arc<dyn super::Transport>>,
    /// The standby database's options, which are also those of the
    /// primary it becomes when promoted ([`crate::Backup::promote`]): its
    /// durability (not `Off`; with checkpoints, the standby takes its own
    /// every `checkpoint.interval`, always full ones), epochs,
    /// and `primary` (where its own backups connect once promoted).
    /// `data_dir` is replaced by the one above. Default: value logging
    /// with checkpoints.
    pub database: Options,
}

impl BackupOptions {
    /// A backup of the primary at `primary`, in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>, primary: impl Into<String>) -> BackupOptions {
        BackupOptions {
            data_dir: data_dir.into(),
            primary: primary.into(),
            retry: Duration::from_millis(200),
            idle_timeout: Duration::from_secs(5),
            secret: None,
            replay_memory: super::standby::DEFAULT_REPLAY_MEMORY,
            node: 0,
            transport: None,
            database: Options { durability: Durability::LogAndCheckpoint, ..Options::default() },
        }
    }
}

/// The receiver of a backup: a thread that receives the primary's
/// streams into the data directory and hands persisted blocks to replay,
/// and the replayer. Stopping or dropping it stops both.
pub(crate) struct Receiver {
    status: Arc<Status>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Result<()>, Disk)>>,
    view: Arc<ReadView>,
    replay: Arc<Replay>,
    replayer: Option<Replayer>,
}

#[derive(Default)]
struct Status {
    /// Where the primary is ([`crate::Backup::follow`] moves it).
    primary: Mutex<String>,
    /// Bumped by each move: a session with an older number ends.
    moves: AtomicU64,
    /// Shared with the standby's checkpointer.
    persisted: Arc<AtomicU64>,
    connected: AtomicBool,
    error: Mutex<Option<String>>,
    /// The primary's reason, if it refused this backup as diverged.
    diverged: Mutex<Option<String>>,
}

/// What the receiver writes with.
struct Disk {
    shared: Arc<Shared>,
    store: Arc<Store>,
    log: LogFile,
    pepoch_file: PepochFile,
    pepoch: u64,
    rotate: Rotation,
    replay: Arc<Replay>,
    view: Arc<ReadView>,
    /// The largest epoch its log may hold: what recovery saw at open (the
    /// tail above pepoch included), then every block received.
    top: u64,
}

impl Receiver {
    /// Starts receiving into the standby `shared`, opened from the
    /// backup's directory with `pepoch_file` and the largest epoch its
    /// log may hold (`top`), and replaying into it at `view`.
    /// `start_checkpoints` is given the persisted epoch the standby's
    /// checkpoints may cover, before the first block arrives.
    pub fn start(
        opts: BackupOptions,
        shared: Arc<Shared>,
        view: Arc<ReadView>,
        (pepoch_file, top): (PepochFile, u64),
        start_checkpoints: impl FnOnce(Arc<AtomicU64>) -> Result<()>,
    ) -> Result<Receiver> {
        let store = shared.store.clone();
        let pepoch = store.recovery.as_ref().map_or(0, |r| r.pepoch);
        let replay = Arc::new(Replay::new(opts.replay_memory.max(1 << 16)));
        replay.persisted(pepoch);
        let replayer = Replayer::start(shared.clone(), view.clone(), replay.clone(), pepoch)?;
        let log = LogFile::create(&store.dirs.log[0], &store.io)?;
        let rotate = Rotation::of(&shared.options);
        let disk =
            Disk { shared, store, log, pepoch_file, pepoch, rotate, replay: replay.clone(), view: view.clone(), top };
        let status = Arc::new(Status {
            primary: Mutex::new(opts.primary.clone()),
            persisted: Arc::new(AtomicU64::new(pepoch)),
            ..Status::default()
        });
        start_checkpoints(status.persisted.clone())?;
        let stop = Arc::new(AtomicBool::new(false));
        let (st, s) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("epochdb-backup".into())
            .spawn(move || receive(opts, disk, &st, &s))
            .map_err(|e| Error::Replication(format!("start the backup thread: {e}")))?;
        Ok(Receiver { status, stop, thread: Some(thread), view, replay, replayer: Some(replayer) })
    }

    /// The read view: snapshots show every epoch `<=` this (0: none yet).
    pub fn read_view(&self) -> u64 {
        self.view.view()
    }

    pub fn status(&self) -> StandbyStatus {
        let (pending_bytes, log_pending_bytes, peak_pending_bytes, log_replayed_bytes) = self.replay.pending();
        StandbyStatus {
            persisted: self.persisted_epoch(),
            released: self.replay.released_epoch(),
            view: self.view.view(),
            pending_bytes,
            log_pending_bytes,
            peak_pending_bytes,
            log_replayed_bytes,
            staleness: self.view.staleness(),
            connected: self.is_connected(),
            replay_error: self.replay.error(),
        }
    }

    pub fn persisted_epoch(&self) -> u64 {
        self.status.persisted.load(Ordering::Acquire)
    }

    pub fn primary(&self) -> String {
        lock(&self.status.primary).clone()
    }

    pub fn follow(&self, primary: String) {
        ::log::info!("backup: following the primary at {primary}");
        *lock(&self.status.primary) = primary;
        self.status.moves.fetch_add(1, Ordering::AcqRel);
    }

    pub fn is_connected(&self) -> bool {
        self.status.connected.load(Ordering::Acquire)
    }

    pub fn error(&self) -> Option<String> {
        lock(&self.status.error).clone()
    }

    pub fn diverged(&self) -> Option<String> {
        lock(&self.status.diverged).clone()
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops receiving (what is persisted stays); the error that stopped
    /// it earlier, if one did.
    pub fn finish(&mut self) -> Result<()> {
        self.stop_receiving()?.map_or(Ok(()), |(r, _)| r)
    }

    /// Stops the receiver; its result and its disk (`None` if stopped
    /// before).
    fn stop_receiving(&mut self) -> Result<Option<(Result<()>, Disk)>> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(done)) => Ok(Some(done)),
            Some(Err(_)) => Err(Error::Replication("the backup thread panicked".into())),
            None => Ok(None),
        }
    }

    /// The receiver's half of a promotion: receiving stops, every
    /// persisted epoch is replayed, replay stops, and the log is sealed
    /// (the loggers start a `data.log` of their own). Returns the standby's
    /// pepoch, the largest epoch its log may hold and its pepoch file,
    /// for the database's half.
    pub fn hand_over(&mut self) -> Result<(u64, u64, PepochFile)> {
        let Some((received, mut disk)) = self.stop_receiving()? else {
            return Err(Error::Replication("promote: the backup was stopped".into()));
        };
        if let Err(e) = received {
            ::log::warn!("promoting a backup whose receiver had stopped: {e}");
        }
        let pepoch = disk.pepoch;
        self.replay.through_persisted(pepoch);
        while self.view.view() < pepoch {
            if let Some(e) = self.replay.error() {
                return Err(Error::Replication(format!("promote: replay failed ({e}); open the directory instead")));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(self.replayer.take());
        disk.log.seal(&disk.store.io)?;
        let Disk { pepoch_file, top, .. } = disk;
        Ok((pepoch, top, pepoch_file))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Connects, receives until the connection drops, and again, until
/// stopped. Hands its disk back (for a promotion).
fn receive(opts: BackupOptions, mut disk: Disk, status: &Status, stop: &AtomicBool) -> (Result<()>, Disk) {
    let mut repeats = Repeats::default();
    while !stop.load(Ordering::Acquire) {
        if let Err(e) = disk.forget_unpersisted() {
            return (Err(e), disk);
        }
        let moves = status.moves.load(Ordering::Acquire);
        let r = session(&opts, &mut disk, status, stop);
        if status.connected.swap(false, Ordering::AcqRel) {
            repeats = Repeats::default();
        }
        match r {
            Ok(()) => {}
            Err(Ended::Stop(e)) => {
                ::log::error!("backup stopped: {e}");
                *lock(&status.error) = Some(e.to_string());
                return (Err(e), disk);
            }
            Err(Ended::Retry(e)) => {
                let e = e.to_string();
                repeats.warn(&e, opts.retry);
                *lock(&status.error) = Some(e);
            }
        }
        // A move is followed at once.
        let until = std::time::Instant::now() + opts.retry;
        while std::time::Instant::now() < until
            && !stop.load(Ordering::Acquire)
            && status.moves.load(Ordering::Acquire) == moves
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    (Ok(()), disk)
}

/// How often the same failure to connect is logged again: a backup tries
/// every [`BackupOptions::retry`] (200 ms), and a primary that is down for
/// an hour would otherwise fill the log with 18,000 lines.
const REPEAT_LOG: Duration = Duration::from_secs(30);

/// The last connection failure logged, when, and how many like it since.
#[derive(Default)]
struct Repeats {
    last: Option<(String, std::time::Instant, u64)>,
}

impl Repeats {
    fn warn(&mut self, e: &str, retry: Duration) {
        let now = std::time::Instant::now();
        match &mut self.last {
            Some((last, at, n)) if last == e && now.duration_since(*at) < REPEAT_LOG => {
                *n += 1;
                return;
            }
            Some((last, _, n)) if last == e => {
                ::log::warn!("backup: {e}; still connecting again every {retry:?} ({n} failures like it since)")
            }
            _ => ::log::warn!("backup: {e}; connecting again every {retry:?}"),
        }
        self.last = Some((e.to_string(), now, 0));
    }
}

/// Why a connection ended.
enum Ended {
    /// The network: connect again.
    Retry(Error),
    /// A refusal, a bad stream or a local (disk) error: another try will
    /// not mend it.
    Stop(Error),
}

impl From<Error> for Ended {
    fn from(e: Error) -> Ended {
        Ended::Stop(e)
    }
}

fn bad(what: String) -> Error {
    Error::Replication(format!("bad stream: {what}"))
}

/// One connection: hello, welcome, then blocks and seals.
fn session(
    opts: &BackupOptions,
    disk: &mut Disk,
    status: &Status,
    stop: &AtomicBool,
) -> std::result::Result<(), Ended> {
    let moves = status.moves.load(Ordering::Acquire);
    let primary = lock(&status.primary).clone();
    let net = |e: std::io::Error| Ended::Retry(Error::Replication(format!("primary {primary}: {e}")));
    let addr = (primary.to_socket_addrs().map_err(net)?.next())
        .ok_or_else(|| Ended::Retry(Error::Replication(format!("primary {primary}: no address"))))?;
    let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(net)?;
    let sock = match &opts.transport {
        Some(t) => t.connected(sock, &primary).map_err(net)?,
        None => sock,
    };
    sock.set_nodelay(true).map_err(net)?;
    // Short reads, so a stop is seen; idleness is counted across them.
    sock.set_read_timeout(Some(Duration::from_millis(100))).map_err(net)?;
    let mut w = &sock;
    let mut r = std::io::BufReader::with_capacity(1 << 20, &sock);
    let mut body = Vec::new();
    let mut idle = Duration::ZERO;
    let mut next = |r: &mut std::io::BufReader<&TcpStream>, body: &mut Vec<u8>| -> std::result::Result<_, Ended> {
        loop {
            if stop.load(Ordering::Acquire) {
                return Ok(None);
            }
            if status.moves.load(Ordering::Acquire) != moves {
                let e = Error::Replication(format!("the primary moved to {}", lock(&status.primary)));
                return Err(Ended::Retry(e));
            }
            // Wait for the first byte of a frame here, where a timeout
            // loses nothing; a frame begun is read to its end.
            match r.fill_buf() {
                Ok([]) => return Ok(None),
                Ok(_) => {
                    idle = Duration::ZERO;
                    return wire::recv(r, body).map_err(Ended::Retry);
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    idle += Duration::from_millis(100);
                    if idle >= opts.idle_timeout {
                        let e = Error::Replication(format!("no word from the primary for {idle:?}"));
                        return Err(Ended::Retry(e));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(net(e)),
            }
        }
    };
    let theirs = match next(&mut r, &mut body)? {
        Some(Msg::Challenge { version: wire::VERSION, nonce }) => nonce,
        Some(Msg::Challenge { version, .. }) => {
            let e = format!("the primary speaks protocol version {version}; this backup speaks {}", wire::VERSION);
            return Err(Error::Replication(e).into());
        }
        Some(other) => return Err(bad(format!("expected a challenge, got {other:?}")).into()),
        None => return Ok(()),
    };
    let secret = opts.secret.as_deref().unwrap_or_default().as_bytes();
    let ours = wire::nonce()?;
    let proof = wire::proof(secret, wire::Side::Backup, &theirs, &ours);
    let ((term, term_start), term_id) = {
        let m = lock(&disk.store.manifest);
        (m.term(), m.term_id())
    };
    let (version, pepoch, top, node) = (wire::VERSION, disk.pepoch, disk.top, opts.node);
    let hello = Msg::Hello { version, pepoch, top, term, term_start, term_id, nonce: ours, proof, node };
    wire::send(&mut w, &hello).map_err(Ended::Retry)?;
    let streams = match next(&mut r, &mut body)? {
        Some(Msg::Welcome { streams, proof, manifest }) => {
            if !wire::verify(secret, wire::Side::Primary, &theirs, &ours, &proof) {
                let e = "authentication failed: the primary does not hold this backup's secret";
                return Err(Error::Replication(e.into()).into());
            }
            disk.take_manifest(&manifest)?;
            streams as usize
        }
        Some(Msg::Refuse { reason }) => {
            if let Some(why) = reason.strip_prefix(wire::DIVERGED) {
                *lock(&status.diverged) = Some(why.to_string());
            }
            return Err(Error::Replication(format!("refused by the primary: {reason}")).into());
        }
        Some(other) => return Err(bad(format!("expected a welcome, got {other:?}")).into()),
        None => return Ok(()),
    };
    if streams == 0 {
        return Err(bad("a primary with no log streams".into()).into());
    }
    status.connected.store(true, Ordering::Release);
    ::log::info!("backup: connected to {addr} at epoch {} ({streams} streams)", disk.pepoch);
    let mut sealed = vec![disk.pepoch; streams];
    let mut told_view = 0;
    // Streams with nothing on their connection yet: a seal from each is
    // needed before the minimum means anything.
    let mut heard = vec![false; streams];
    while let Some(msg) = next(&mut r, &mut body)? {
        match msg {
            Msg::Block { stream, lo, hi, block } => {
                if stream as usize >= streams {
                    return Err(bad(format!("a block of stream {stream} of {streams}")).into());
                }
                let epochs = frame::check_block(&block).map_err(bad)?;
                if epochs != (lo, hi) {
                    return Err(bad(format!("a block said to hold {lo}..={hi} holds {epochs:?}")).into());
                }
                disk.top = disk.top.max(hi);
                let at = disk.log.offset();
                disk.log.append(&disk.store.io, &block, lo, hi, None)?;
                // Replay may read it back from there (a catch-up longer
                // than its memory); without the file it stays in memory.
                let log = disk.log.reader().map(|f| (f, at)).ok();
                disk.replay.push(lo, hi, block, log, stop);
                if body.capacity() == 0 {
                    body = disk.replay.spare(); // `recv` gave the last one away
                }
            }
            Msg::Released { epoch } => disk.replay.released(epoch),
            Msg::Seal { stream, epoch } => {
                let s = sealed.get_mut(stream as usize).ok_or_else(|| bad(format!("a seal of stream {stream}")))?;
                *s = (*s).max(epoch);
                heard[stream as usize] = true;
            }
            Msg::Manifest { manifest } => disk.take_manifest(&manifest)?,
            other => return Err(bad(format!("unexpected message {other:?}")).into()),
        }
        // Persist once the socket has nothing more buffered: one sync for
        // a burst of seals.
        let low = rules::to_persist(&sealed, &heard, disk.pepoch).filter(|_| r.buffer().is_empty());
        if let Some(low) = low {
            disk.persist(low)?;
            status.persisted.store(low, Ordering::Release);
            // Before the ack, whose send fails when the primary just died.
            disk.replay.persisted(low);
            wire::send(&mut w, &Msg::Ack { pepoch: low }).map_err(Ended::Retry)?;
        }
        let view = disk.view.view();
        if view > told_view && r.buffer().is_empty() {
            wire::send(&mut w, &Msg::Replayed { epoch: view }).map_err(Ended::Retry)?;
            told_view = view;
        }
    }
    Ok(())
}

impl Disk {
    /// Takes the primary's catalog and void epochs into our manifest
    /// (keeping our own directories), durably, before any block that may
    /// name a new table.
    fn take_manifest(&mut self, encoded: &[u8]) -> Result<()> {
        let theirs = Manifest::decode_current(encoded).ok_or_else(|| bad("an undecodable manifest".into()))?;
        let mut ours = lock(&self.store.manifest);
        let mut next = ours.clone();
        if theirs.tables.len() < next.tables.len() || theirs.tables[..next.tables.len()] != next.tables[..] {
            return Err(bad("the primary's catalog is not an extension of this backup's: another database?".into()));
        }
        next.tables = theirs.tables;
        // The primary checked that our history is a prefix of its own.
        next.promotions = theirs.promotions;
        // A primary forgets voids below its checkpoint; this log may still
        // hold those epochs, so the backup keeps every void it was told.
        for v in theirs.voids {
            if !next.voids.contains(&v) {
                next.voids.push(v);
            }
        }
        self.store.store_manifest(&mut ours, next)?;
        self.shared.extend_catalog(&ours);
        Ok(())
    }

    /// Before a session: a backup that has persisted nothing drops what an
    /// earlier session sent it (a catch-up cut short): its `data.log`, and
    /// the `old_data.*` files a restart sealed it into. The next catch-up
    /// may start from a newer checkpoint, and rows of the older one
    /// whose later deletes it never received would come back, here or at
    /// its next recovery. (Once something is persisted, a session resumes
    /// above it, with no checkpoint: what it sends again is the same
    /// history.) Nothing of it was replayed: replay waits for a persisted
    /// epoch. The directory is locked (the standby holds it open), and
    /// only log files epochdb wrote are removed.
    fn forget_unpersisted(&mut self) -> Result<()> {
        if self.pepoch > 0 || self.top == 0 {
            return Ok(());
        }
        ::log::info!("backup: dropping a catch-up cut short (nothing of it was persisted)");
        self.log = LogFile::create(&self.store.dirs.log[0], &self.store.io)?;
        let io = &self.store.io;
        for dir in &self.store.dirs.log {
            for (_, path) in datadir::old_log_files(dir, |_| true)? {
                io.remove_file(&path)?;
            }
            io.sync_dir(dir)?;
        }
        self.replay.clear();
        self.top = 0;
        Ok(())
    }

    /// Syncs the log, then records `pepoch` in the pepoch file.
    fn persist(&mut self, pepoch: u64) -> Result<()> {
        self.log.sync(&self.store.io)?;
        self.pepoch_file.write(pepoch)?;
        self.pepoch = pepoch;
        if self.log.rotation_due(self.rotate) {
            self.log.rotate(&self.store.io)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_connection_failure_is_logged_once_per_period() {
        let retry = Duration::from_millis(200);
        let mut r = Repeats::default();
        r.warn("refused", retry);
        r.warn("refused", retry);
        r.warn("refused", retry);
        assert_eq!(r.last.as_ref().map(|l| l.2), Some(2), "two repeats held back");
        r.warn("reset", retry);
        assert_eq!(r.last.as_ref().map(|l| (&l.0[..], l.2)), Some(("reset", 0)), "a new failure is logged");
        // Past the period, the same failure is logged again with its count.
        r.last.as_mut().expect("a failure logged").1 -= REPEAT_LOG;
        r.warn("reset", retry);
        assert_eq!(r.last.as_ref().map(|l| l.2), Some(0));
    }
}

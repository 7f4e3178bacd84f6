//! [`Backup`]: a replication backup with its hot standby, the database
//! it replays into, and that database's promotion.

use super::Database;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use crate::replication::{BackupOptions, Receiver, StandbyStatus};
use crate::txn::ReadView;
use std::sync::Arc;

/// A running backup: its receiver thread and its hot standby. Stop it
/// with [`Backup::stop`]; dropping it stops it too.
pub struct Backup {
    // Dropped first: the receiver and replay stop before the database
    // they write into closes.
    receiver: Receiver,
    db: Database,
}

impl std::fmt::Debug for Backup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backup").field("primary", &self.primary()).field("view", &self.read_view()).finish()
    }
}

impl Backup {
    /// Opens (recovering) the data directory, then receives from the
    /// primary in a thread, connecting again whenever the connection
    /// drops. A primary that refuses this backup stops it: see
    /// [`Backup::error`].
    pub fn start(opts: BackupOptions) -> Result<Backup> {
        let options = Options { data_dir: Some(opts.data_dir.clone()), ..opts.database.clone() };
        if options.durability == Durability::Off || options.read_only {
            return Err(Error::InvalidOptions(
                "a backup's database needs durability, and must not be read-only".into(),
            ));
        }
        let view = Arc::new(ReadView::default());
        let (db, pepoch_file, top) = Database::open_standby(options, view.clone())?;
        let shared = db.shared().clone();
        let receiver = Receiver::start(opts, shared, view, (pepoch_file, top), |persisted| {
            db.start_standby_checkpoints(persisted)
        })?;
        Ok(Backup { receiver, db })
    }

    /// The hot standby: a read-only database that follows the primary.
    /// Read it with snapshot transactions ([`crate::Worker::snapshot`],
    /// [`crate::Worker::snapshot_fresh`]): they show the read view, every
    /// epoch the backup has persisted and replayed and the primary has
    /// released, and nothing newer. Writes give [`Error::ReadOnly`].
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The read view: snapshots show every epoch `<=` this (0: none yet).
    pub fn read_view(&self) -> u64 {
        self.receiver.read_view()
    }

    /// Where the standby stands: persisted, released and read-view epochs,
    /// replay backlog and staleness.
    pub fn status(&self) -> StandbyStatus {
        self.receiver.status()
    }

    /// The largest epoch this backup has on disk and acknowledged.
    pub fn persisted_epoch(&self) -> u64 {
        self.receiver.persisted_epoch()
    }

    /// The primary's replication address it follows now.
    pub fn primary(&self) -> String {
        self.receiver.primary()
    }

    /// Follows the primary at `primary` from now on: a primary promoted
    /// after its own (by a control plane, or by hand). The connection to
    /// the old one ends, and the backup connects to the new one at once,
    /// resuming from its persisted epoch as after any reconnection. The
    /// new primary admits it only if its history is a prefix of its own
    /// (it persisted nothing that the promotion did not keep), else it
    /// refuses it as diverged ([`Backup::diverged`]); what the backup
    /// received above its persisted epoch and the promotion made void is
    /// never replayed.
    pub fn follow(&self, primary: impl Into<String>) {
        self.receiver.follow(primary.into())
    }

    /// Whether it is connected to its primary now.
    pub fn is_connected(&self) -> bool {
        self.receiver.is_connected()
    }

    /// The last error: a refusal (which stopped it) or a lost connection.
    pub fn error(&self) -> Option<String> {
        self.receiver.error()
    }

    /// Why the primary refused this backup as diverged, if it did: its
    /// directory holds epochs the primary's history does not (a deposed
    /// primary's tail, or a tail of an older term). It must be moved aside
    /// and the backup started from an empty one; the receiver has stopped.
    pub fn diverged(&self) -> Option<String> {
        self.receiver.diverged()
    }

    /// Whether the receiver has stopped (refused, or a local disk error).
    pub fn is_finished(&self) -> bool {
        self.receiver.is_finished()
    }

    /// Stops receiving (what is persisted stays) and returns the error that
    /// stopped it earlier, if one did.
    pub fn stop(mut self) -> Result<()> {
        self.receiver.finish()
    }

    /// Promotes this standby to a primary, in place, and returns its
    /// database: the same handle [`Backup::database`] gave, whose workers
    /// and snapshots go on, now accepting writes.
    ///
    /// Receiving stops, and every epoch this backup persisted is replayed,
    /// including those its primary had not released yet (their clients
    /// had no answer). What it received above that is made void, durably,
    /// and the new primary's epochs start above it all. Then the loggers,
    /// the checkpointer and, if [`BackupOptions::database`] has
    /// `primary`, a replication primary for backups of its own start.
    ///
    /// Under `sync` every released commit is on each in-sync backup, so
    /// promoting one loses no acknowledged commit; under `async` the last
    /// epochs the backup had not persisted are lost (compare
    /// [`Backup::persisted_epoch`] of the backups and promote the highest).
    /// Nothing here fences the old primary (a control plane's
    /// [`crate::Lease`] does): without one, promote only once it is down
    /// for good, or it may go on releasing commits alone once this backup
    /// stops acknowledging.
    ///
    /// A replay that failed cannot be promoted in place ([`Error::Replication`]):
    /// open the directory with [`Database::open`] instead (once the
    /// returned error has dropped the backup), which recovers it the same
    /// way; so after any error of a promotion.
    pub fn promote(mut self) -> Result<Database> {
        let (pepoch, top, pepoch_file) = self.receiver.hand_over()?;
        self.db.promote(pepoch, top, pepoch_file)?;
        Ok(self.db.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::datadir::manifest::{Manifest, TableEntry};
    use crate::durability::{frame, log};
    use crate::replication::wire::{self, Msg};
    use crate::tid::Tid;
    use std::net::TcpListener;
    use std::time::Duration;

    /// One session of a fake primary: the handshake, a welcome naming
    /// table `t`, then `frames`; then it waits until the backup hangs up.
    fn fake_session(listener: &TcpListener, frames: &[Msg]) {
        let (mut s, _) = listener.accept().expect("accept");
        let ours = [7u8; 32];
        wire::send(&mut s, &Msg::Challenge { version: wire::VERSION, nonce: ours }).expect("challenge");
        let mut r = std::io::BufReader::new(s.try_clone().expect("clone"));
        let Ok(Some(Msg::Hello { nonce: theirs, .. })) = wire::recv(&mut r, &mut Vec::new()) else {
            panic!("expected a hello")
        };
        let table = TableEntry { name: "t".into(), index_of: None, schema: None };
        let manifest = Manifest { tables: vec![table], ..Manifest::default() }.encode();
        let proof = wire::proof(b"", wire::Side::Primary, &ours, &theirs);
        wire::send(&mut s, &Msg::Welcome { streams: 1, proof, manifest }).expect("welcome");
        frames.iter().for_each(|m| wire::send(&mut s, m).expect("send"));
        // Until the backup has read it all and hung up.
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    }

    /// A catch-up cut short before anything was persisted leaves its block
    /// in the log; the backup restarts (which seals that log into an
    /// `old_data` file), and the next catch-up, from a newer checkpoint
    /// without the row, persists past its epoch. The row must not come
    /// back when the directory is opened.
    #[test]
    fn a_catch_up_cut_short_before_a_restart_does_not_come_back() {
        let dir = std::env::temp_dir().join(format!("epochdb-backup-forget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let mut block = frame::new_block(frame::BLOCK_HEADER_LEN + 64);
        log::encode_txn(&mut block, Tid::new(3, 1), 1);
        log::encode_entry(&mut block, 0, b"ghost", Some(b"deleted later"));
        frame::seal(&mut block, 3, 3);
        let wait = |what: &str, done: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !done() {
                assert!(std::time::Instant::now() < deadline, "{what}");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        std::thread::scope(|s| {
            let l = &listener;
            s.spawn(move || fake_session(l, &[Msg::Block { stream: 0, lo: 3, hi: 3, block }]));
            let backup = Backup::start(BackupOptions::new(&dir, &addr)).expect("start");
            wait("the block never arrived", &|| backup.status().pending_bytes > 0);
            assert_eq!(backup.persisted_epoch(), 0, "nothing persisted");
            let _ = backup.stop();
        });
        std::thread::scope(|s| {
            let l = &listener;
            s.spawn(move || fake_session(l, &[Msg::Seal { stream: 0, epoch: 5 }]));
            let backup = Backup::start(BackupOptions::new(&dir, &addr)).expect("restart");
            wait("epoch 5 was not persisted", &|| backup.persisted_epoch() >= 5);
            let _ = backup.stop();
        });
        let options =
            Options { durability: Durability::Log, data_dir: Some(dir.clone()), read_only: true, ..Options::default() };
        let db = Database::open(options).expect("open");
        let t = db.table("t").expect("table");
        let mut w = db.worker().expect("worker");
        let ghost = w.run(|txn| txn.get(t, b"ghost").map(|v| v.map(<[u8]>::to_vec))).expect("get");
        assert_eq!(ghost, None, "a row of a catch-up nothing of which was persisted came back");
        drop((w, db));
        std::fs::remove_dir_all(&dir).ok();
    }
}

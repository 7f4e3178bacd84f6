//! The Raft log of one node, kept in memory and in one small file.
//!
//! The control plane's log is tiny (appointments and in-sync changes, a
//! few bytes each), so every change rewrites the whole file: written to a
//! temporary file, synced, renamed over the old one, and the directory
//! synced. A crash leaves the old file or the new one, never a mix. Raft
//! needs this before it answers a vote or an append (its hard state and
//! entries must survive a crash). FORMAT.md ("Control plane") has the
//! bytes.

use crate::state::Reader;
use raft::prelude::{ConfState, Entry, EntryType, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"EPOCHRFT";
const VERSION: u32 = 1;
const FILE: &str = "raft";
/// Entries kept after they are applied, before they are folded into the
/// snapshot.
const KEEP: usize = 64;

/// What a node's Raft log holds; the `raft::Storage` of its `RawNode`.
#[derive(Debug)]
pub struct Log {
    disk: Disk,
    pub hs: HardState,
    /// The voters as of the applied state (conf changes included).
    voters: Vec<u64>,
    /// The snapshot: the state applied through `snap_index`.
    snap_index: u64,
    snap_term: u64,
    snap_data: Vec<u8>,
    entries: Vec<Entry>,
    /// This node's own record (not replicated): the appointment under
    /// which it last served as primary (0: never), with [`FORGOTTEN`] set
    /// once its data from then was set aside. A node that served and was
    /// then deposed may hold epochs the new primary lacks. See [`held`].
    pub served: u64,
    /// The latest applied state, for a follower that needs a snapshot.
    applied: (u64, u64, Vec<u8>),
}

/// The top bit of `Log::served`: the data of that appointment was set
/// aside. The appointment stays, so that applying the log again after a
/// restart (which replays that appointment's entry) does not bring it back.
pub const FORGOTTEN: u64 = 1 << 63;

/// The appointment whose data this node still holds (0: none).
pub fn held(served: u64) -> u64 {
    if served & FORGOTTEN != 0 {
        0
    } else {
        served
    }
}

/// `served` once its data was set aside.
pub fn forgotten(served: u64) -> u64 {
    if served == 0 {
        0
    } else {
        served | FORGOTTEN
    }
}

/// `served` once this node applies its own appointment `appointment`:
/// only a newer one counts.
pub fn serving(served: u64, appointment: u64) -> u64 {
    if appointment > served & !FORGOTTEN {
        appointment
    } else {
        served
    }
}

/// Why a control directory could not be used.
pub type Error = String;

/// Where a log is kept: a directory, or (the simulation) bytes in memory
/// that survive the node's crash.
#[derive(Debug, Clone)]
pub enum Disk {
    Dir(PathBuf),
    #[cfg_attr(not(test), allow(dead_code))]
    Memory(std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>),
}

impl Log {
    /// Opens the log in `dir`, or starts an empty one with `voters` (none
    /// for a node joining a group: the leader's snapshot names them).
    /// An existing log keeps the voters its conf changes made: `voters` is
    /// only where a new group begins.
    pub fn open(dir: &Path, voters: &[u64]) -> Result<Log, Error> {
        fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        Log::load(Disk::Dir(dir.to_path_buf()), voters)
    }

    /// Opens the log kept on `disk`.
    pub fn load(disk: Disk, voters: &[u64]) -> Result<Log, Error> {
        let (bytes, name) = match &disk {
            Disk::Dir(dir) => {
                let path = dir.join(FILE);
                let name = path.display().to_string();
                match fs::read(&path) {
                    Ok(b) => (Some(b), name),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, name),
                    Err(e) => return Err(format!("read {name}: {e}")),
                }
            }
            Disk::Memory(m) => (m.lock().unwrap_or_else(|e| e.into_inner()).clone(), "the simulated disk".into()),
        };
        let mut log = Log {
            disk,
            hs: HardState::default(),
            voters: voters.to_vec(),
            snap_index: 0,
            snap_term: 0,
            snap_data: Vec::new(),
            entries: Vec::new(),
            served: 0,
            applied: (0, 0, Vec::new()),
        };
        let Some(bytes) = bytes else { return Ok(log) };
        log.decode(&bytes).ok_or_else(|| format!("{name} is damaged (or not a control log)"))?;
        if log.voters != voters {
            ::log::info!("control: the group's voters are {:?} (members changed since it began)", log.voters);
        }
        log.applied = (log.snap_index, log.snap_term, log.snap_data.clone());
        Ok(log)
    }

    pub fn voters(&self) -> &[u64] {
        &self.voters
    }

    /// A conf change applied (at the index `applied` records next).
    pub fn set_voters(&mut self, mut voters: Vec<u64>) {
        voters.sort_unstable();
        self.voters = voters;
    }

    /// Folds every applied entry into the snapshot. After a conf change:
    /// a node that joins later is then sent the snapshot, which names the
    /// voters, never entries from before it that its empty configuration
    /// would misread.
    pub fn fold(&mut self) {
        let (index, term, state) = self.applied.clone();
        if index <= self.snap_index {
            return;
        }
        let applied_entries = self.entries.iter().take_while(|e| e.index <= index).count();
        (self.snap_index, self.snap_term, self.snap_data) = (index, term, state);
        self.entries.drain(..applied_entries);
    }

    /// The snapshot's index and state, to restore from at start.
    pub fn snapshot_state(&self) -> (u64, &[u8]) {
        (self.snap_index, &self.snap_data)
    }

    pub fn append(&mut self, new: &[Entry]) {
        let Some(first) = new.first() else { return };
        let keep = first.index.saturating_sub(self.first()) as usize;
        self.entries.truncate(keep.min(self.entries.len()));
        self.entries.extend_from_slice(new);
    }

    pub fn apply_snapshot(&mut self, s: &Snapshot) {
        let m = s.get_metadata();
        self.snap_index = m.index;
        self.snap_term = m.term;
        self.snap_data = s.data.to_vec();
        self.set_voters(m.get_conf_state().voters.clone());
        self.entries.retain(|e| e.index > m.index);
        if self.entries.first().is_some_and(|e| e.index != m.index + 1) {
            self.entries.clear();
        }
        self.hs.commit = self.hs.commit.max(m.index);
        self.hs.term = self.hs.term.max(m.term);
        self.applied = (m.index, m.term, self.snap_data.clone());
    }

    /// Records the state applied through `index`; folds old entries into
    /// the snapshot once there are many.
    pub fn applied(&mut self, index: u64, state: Vec<u8>) {
        let term = self.term_of(index).unwrap_or(self.snap_term);
        self.applied = (index, term, state);
        let applied_entries = self.entries.iter().take_while(|e| e.index <= index).count();
        if applied_entries > KEEP {
            self.snap_index = index;
            self.snap_term = term;
            self.snap_data = self.applied.2.clone();
            self.entries.drain(..applied_entries);
        }
    }

    fn first(&self) -> u64 {
        self.snap_index + 1
    }

    fn last(&self) -> u64 {
        self.entries.last().map_or(self.snap_index, |e| e.index)
    }

    fn term_of(&self, idx: u64) -> Option<u64> {
        if idx == self.snap_index {
            return Some(self.snap_term);
        }
        let i = idx.checked_sub(self.first())?;
        self.entries.get(i as usize).map(|e| e.term)
    }

    /// Writes the whole log, durably.
    pub fn persist(&self) -> Result<(), Error> {
        let bytes = self.encode();
        let dir = match &self.disk {
            Disk::Dir(dir) => dir,
            Disk::Memory(m) => {
                *m.lock().unwrap_or_else(|e| e.into_inner()) = Some(bytes);
                return Ok(());
            }
        };
        let (tmp, path) = (dir.join("raft.tmp"), dir.join(FILE));
        let io = |what: &str, e: std::io::Error| format!("{what} {}: {e}", tmp.display());
        let mut f = File::create(&tmp).map_err(|e| io("create", e))?;
        f.write_all(&bytes).map_err(|e| io("write", e))?;
        f.sync_data().map_err(|e| io("sync", e))?;
        fs::rename(&tmp, &path).map_err(|e| io("rename", e))?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("sync the directory of", e))
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&VERSION.to_le_bytes());
        for v in [self.hs.term, self.hs.vote, self.hs.commit] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(self.voters.len() as u32).to_le_bytes());
        self.voters.iter().for_each(|v| b.extend_from_slice(&v.to_le_bytes()));
        b.extend_from_slice(&self.snap_index.to_le_bytes());
        b.extend_from_slice(&self.snap_term.to_le_bytes());
        put_bytes(&mut b, &self.snap_data);
        b.extend_from_slice(&self.served.to_le_bytes());
        b.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            b.extend_from_slice(&e.term.to_le_bytes());
            b.extend_from_slice(&e.index.to_le_bytes());
            b.push(e.get_entry_type() as u8);
            put_bytes(&mut b, &e.data);
            put_bytes(&mut b, &e.context);
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(&mut self, b: &[u8]) -> Option<()> {
        let (body, crc) = b.split_at(b.len().checked_sub(4)?);
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return None;
        }
        let mut r = Reader(body);
        if r.take(8)? != MAGIC || r.u32()? != VERSION {
            return None;
        }
        self.hs.term = r.u64()?;
        self.hs.vote = r.u64()?;
        self.hs.commit = r.u64()?;
        let n = r.u32()? as usize;
        self.voters = (0..n.min(body.len() / 8)).map(|_| r.u64()).collect::<Option<_>>()?;
        self.snap_index = r.u64()?;
        self.snap_term = r.u64()?;
        self.snap_data = r.bytes()?;
        self.served = r.u64()?;
        let n = r.u32()? as usize;
        let mut entries = Vec::with_capacity(n.min(body.len() / 17));
        for _ in 0..n {
            let mut e = Entry { term: r.u64()?, index: r.u64()?, ..Entry::default() };
            e.set_entry_type(match r.take(1)?[0] {
                0 => EntryType::EntryNormal,
                1 => EntryType::EntryConfChange,
                2 => EntryType::EntryConfChangeV2,
                _ => return None,
            });
            e.data = r.bytes()?.into();
            e.context = r.bytes()?.into();
            entries.push(e);
        }
        let contiguous = entries.iter().enumerate().all(|(i, e)| e.index == self.snap_index + 1 + i as u64);
        self.entries = entries;
        (r.0.is_empty() && contiguous).then_some(())
    }
}

fn put_bytes(b: &mut Vec<u8>, v: &[u8]) {
    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
    b.extend_from_slice(v);
}

fn unavailable() -> raft::Error {
    raft::Error::Store(StorageError::Unavailable)
}

impl Storage for Log {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let conf_state = ConfState { voters: self.voters.clone(), ..ConfState::default() };
        Ok(RaftState { hard_state: self.hs.clone(), conf_state })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(unavailable());
        }
        let (lo, hi) = ((low - self.first()) as usize, (high - self.first()) as usize);
        let mut ents = self.entries[lo..hi].to_vec();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.snap_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.term_of(idx).ok_or_else(unavailable)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let (index, term, data) = &self.applied;
        if *index < request_index {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        let mut s = Snapshot { data: data.clone().into(), ..Snapshot::default() };
        let m = s.mut_metadata();
        m.index = *index;
        m.term = *term;
        m.mut_conf_state().voters = self.voters.clone();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry { index, term, data: data.to_vec().into(), ..Entry::default() }
    }

    #[test]
    fn a_log_survives_a_reopen_and_folds_old_entries_into_its_snapshot() {
        let dir = std::env::temp_dir().join(format!("epochdb-control-log-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut log = Log::open(&dir, &[1, 2, 3]).expect("open");
        log.hs.term = 2;
        log.hs.vote = 1;
        log.served = 4;
        log.append(&(1..=100).map(|i| entry(i, 2, &[i as u8])).collect::<Vec<_>>());
        log.append(&[entry(99, 3, b"replaced"), entry(100, 3, b"too")]);
        assert_eq!(log.term(98).expect("term"), 2);
        assert_eq!(log.term(99).expect("term"), 3);
        log.applied(90, b"state at 90".to_vec());
        assert_eq!(log.first_index().expect("first"), 91, "folded into the snapshot");
        log.persist().expect("persist");

        let back = Log::open(&dir, &[1, 2, 3]).expect("reopen");
        assert_eq!((back.hs.term, back.hs.vote, back.served), (2, 1, 4));
        assert_eq!(back.snapshot_state(), (90, &b"state at 90"[..]));
        let ents = back.entries(91, 101, None, GetEntriesContext::empty(false)).expect("entries");
        assert_eq!(ents.len(), 10);
        assert_eq!(&ents[9].data[..], b"too");
        assert!(matches!(back.entries(50, 60, None, GetEntriesContext::empty(false)), Err(raft::Error::Store(_))));
        let other = Log::open(&dir, &[1, 2]).expect("a log whose voters changed");
        assert_eq!(other.voters(), &[1, 2, 3], "the log's voters win over the flags'");

        let mut bytes = fs::read(dir.join(FILE)).expect("read");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        fs::write(dir.join(FILE), &bytes).expect("damage");
        assert!(Log::open(&dir, &[1, 2, 3]).expect_err("damaged").contains("damaged"));
        let _ = fs::remove_dir_all(&dir);
    }
}

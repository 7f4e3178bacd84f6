//! The file-system interface (NVM study §2.2): named files with write and
//! fsync, for the traditional engines' logs, checkpoints and SSTables.
//!
//! Files live in the partition's directory, flat. In crash-simulation mode
//! they live in memory: each has its written bytes and its synced bytes,
//! and a crash keeps the synced ones. Creating, renaming and removing are
//! durable at once in simulation, as on a journaling file system after the
//! directory is synced (which the real mode does on every such call).

use super::{Clock, Stats};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

#[derive(Clone, Default)]
struct SimFile {
    data: Vec<u8>,
    synced: Vec<u8>,
}

enum Store {
    Dir { dir: PathBuf, open: HashMap<String, File> },
    Sim(BTreeMap<String, SimFile>),
}

/// See the module documentation.
pub struct Fs {
    store: Store,
    clock: Arc<Clock>,
    stats: Arc<Stats>,
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no file {name}"))
}

impl Fs {
    pub(super) fn dir(dir: &Path, clock: Arc<Clock>, stats: Arc<Stats>) -> io::Result<Fs> {
        Ok(Fs { store: Store::Dir { dir: dir.to_path_buf(), open: HashMap::new() }, clock, stats })
    }

    pub(super) fn simulated(clock: Arc<Clock>, stats: Arc<Stats>) -> Fs {
        Fs { store: Store::Sim(BTreeMap::new()), clock, stats }
    }

    /// Appends to `name`, creating it.
    pub fn append(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        self.stats.file_bytes.fetch_add(data.len() as u64, Relaxed);
        match &mut self.store {
            Store::Dir { dir, open } => {
                if !open.contains_key(name) {
                    let f = OpenOptions::new().create(true).append(true).open(dir.join(name))?;
                    open.insert(name.to_string(), f);
                }
                open.get_mut(name).ok_or_else(|| not_found(name))?.write_all(data)
            }
            Store::Sim(files) => {
                files.entry(name.to_string()).or_default().data.extend_from_slice(data);
                Ok(())
            }
        }
    }

    /// Makes `name`'s contents durable (fdatasync).
    pub fn sync(&mut self, name: &str) -> io::Result<()> {
        self.stats.file_syncs.fetch_add(1, Relaxed);
        let reach = self.clock.tick();
        match &mut self.store {
            Store::Dir { dir, open } => match open.get(name) {
                Some(f) => f.sync_data(),
                None => File::open(dir.join(name))?.sync_data(),
            },
            Store::Sim(files) => {
                let f = files.get_mut(name).ok_or_else(|| not_found(name))?;
                if reach {
                    f.synced.clone_from(&f.data);
                }
                Ok(())
            }
        }
    }

    /// The whole file.
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        match &self.store {
            Store::Dir { dir, .. } => std::fs::read(dir.join(name)),
            Store::Sim(files) => files.get(name).map(|f| f.data.clone()).ok_or_else(|| not_found(name)),
        }
    }

    /// The file's length, if it exists.
    pub fn size(&self, name: &str) -> Option<u64> {
        match &self.store {
            Store::Dir { dir, .. } => std::fs::metadata(dir.join(name)).ok().map(|m| m.len()),
            Store::Sim(files) => files.get(name).map(|f| f.data.len() as u64),
        }
    }

    /// File names, sorted (the region file is not one of them).
    pub fn list(&self) -> io::Result<Vec<String>> {
        match &self.store {
            Store::Dir { dir, .. } => {
                let mut names = Vec::new();
                for e in std::fs::read_dir(dir)? {
                    let name = e?.file_name().to_string_lossy().into_owned();
                    if name != super::REGION_FILE {
                        names.push(name);
                    }
                }
                names.sort();
                Ok(names)
            }
            Store::Sim(files) => Ok(files.keys().cloned().collect()),
        }
    }

    pub fn remove(&mut self, name: &str) -> io::Result<()> {
        match &mut self.store {
            Store::Dir { dir, open } => {
                open.remove(name);
                std::fs::remove_file(dir.join(name))?;
                File::open(&*dir)?.sync_all()
            }
            Store::Sim(files) => files.remove(name).map(drop).ok_or_else(|| not_found(name)),
        }
    }

    /// Atomically replaces `to` with `from` (durable on return).
    pub fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        match &mut self.store {
            Store::Dir { dir, open } => {
                open.remove(from);
                open.remove(to);
                std::fs::rename(dir.join(from), dir.join(to))?;
                File::open(&*dir)?.sync_all()
            }
            Store::Sim(files) => {
                let f = files.remove(from).ok_or_else(|| not_found(from))?;
                files.insert(to.to_string(), f);
                Ok(())
            }
        }
    }

    /// Writes `name` whole, syncs it, and renames it into place: a file
    /// that is either all old or all new after a crash.
    pub fn replace(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        let tmp = format!("{name}.tmp");
        if self.size(&tmp).is_some() {
            self.remove(&tmp)?;
        }
        self.append(&tmp, data)?;
        self.sync(&tmp)?;
        self.rename(&tmp, name)
    }

    /// Total bytes of the files whose names `pick` accepts.
    pub fn bytes(&self, pick: impl Fn(&str) -> bool) -> u64 {
        self.list().unwrap_or_default().iter().filter(|n| pick(n)).filter_map(|n| self.size(n)).sum()
    }

    /// Simulation: the files as a power failure leaves them.
    pub(super) fn crash(&self) -> Fs {
        let files = match &self.store {
            Store::Sim(files) => files
                .iter()
                .map(|(n, f)| (n.clone(), SimFile { data: f.synced.clone(), synced: f.synced.clone() }))
                .collect(),
            Store::Dir { .. } => panic!("Fs::crash needs crash-simulation mode"),
        };
        Fs { store: Store::Sim(files), clock: self.clock.clone(), stats: self.stats.clone() }
    }
}

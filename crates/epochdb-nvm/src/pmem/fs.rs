//! The file-system interface (NVM study §2.2): named files with write and
//! fsync, for the traditional engines' logs, checkpoints and SSTables.
//!
//! Files live in the partition's directory, flat. In crash-simulation mode
//! they live in memory twice: as written, and as durable. Syncing a file
//! copies its bytes to the durable side; renaming and removing apply to the
//! durable side at once (the real mode syncs the directory on each), and a
//! crash keeps only the durable side. All three are persistence events of
//! the crash clock, so after its cut none of them reaches the durable side.

use super::{Clock, Latency, Stats, LINE};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

type Files = BTreeMap<String, Vec<u8>>;

enum Store {
    Dir { dir: PathBuf, open: HashMap<String, File> },
    Sim { written: Files, durable: Files },
}

/// See the module documentation.
pub struct Fs {
    store: Store,
    clock: Arc<Clock>,
    stats: Arc<Stats>,
    latency: Latency,
}

/// `name`'s open handle, opened on first use: for appends (`append`) or
/// for positional reads and writes. A file is used one way only.
fn handle<'f>(dir: &Path, open: &'f mut HashMap<String, File>, name: &str, append: bool) -> io::Result<&'f mut File> {
    if !open.contains_key(name) {
        let mut o = OpenOptions::new();
        o.create(true);
        if append {
            o.append(true);
        } else {
            o.truncate(false).read(true).write(true);
        }
        open.insert(name.to_string(), o.open(dir.join(name))?);
    }
    open.get_mut(name).ok_or_else(|| not_found(name))
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no file {name}"))
}

impl Fs {
    pub(super) fn dir(dir: &Path, clock: Arc<Clock>, stats: Arc<Stats>, latency: Latency) -> io::Result<Fs> {
        Ok(Fs { store: Store::Dir { dir: dir.to_path_buf(), open: HashMap::new() }, clock, stats, latency })
    }

    pub(super) fn simulated(clock: Arc<Clock>, stats: Arc<Stats>, latency: Latency) -> Fs {
        Fs { store: Store::Sim { written: Files::new(), durable: Files::new() }, clock, stats, latency }
    }

    /// Counts a write and charges the emulated NVM write latency per cache
    /// line, as the allocator interface does per persisted line: the
    /// paper's file system (PMFS) writes to the same NVM.
    fn charge(&self, bytes: usize) {
        self.stats.file_bytes.fetch_add(bytes as u64, Relaxed);
        super::spin(self.latency.persist_line_ns * bytes.div_ceil(LINE) as u64);
    }

    /// Appends to `name`, creating it.
    pub fn append(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        self.charge(data.len());
        match &mut self.store {
            Store::Dir { dir, open } => handle(dir, open, name, true)?.write_all(data),
            Store::Sim { written, .. } => {
                written.entry(name.to_string()).or_default().extend_from_slice(data);
                Ok(())
            }
        }
    }

    /// Writes `data` at `offset` of `name` (created if absent; a gap reads
    /// as zeros).
    pub fn write_at(&mut self, name: &str, offset: u64, data: &[u8]) -> io::Result<()> {
        self.charge(data.len());
        match &mut self.store {
            Store::Dir { dir, open } => {
                use std::os::unix::fs::FileExt;
                handle(dir, open, name, false)?.write_all_at(data, offset)
            }
            Store::Sim { written, .. } => {
                let f = written.entry(name.to_string()).or_default();
                let end = offset as usize + data.len();
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[offset as usize..end].copy_from_slice(data);
                Ok(())
            }
        }
    }

    /// Reads `buf.len()` bytes at `offset` of `name`.
    pub fn read_at(&mut self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match &mut self.store {
            Store::Dir { dir, open } => {
                use std::os::unix::fs::FileExt;
                handle(dir, open, name, false)?.read_exact_at(buf, offset)
            }
            Store::Sim { written, .. } => {
                let f = written.get(name).ok_or_else(|| not_found(name))?;
                let src = f.get(offset as usize..offset as usize + buf.len());
                buf.copy_from_slice(src.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?);
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
            Store::Sim { written, durable } => {
                let f = written.get(name).ok_or_else(|| not_found(name))?;
                if reach {
                    durable.insert(name.to_string(), f.clone());
                }
                Ok(())
            }
        }
    }

    /// The whole file.
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        match &self.store {
            Store::Dir { dir, .. } => std::fs::read(dir.join(name)),
            Store::Sim { written, .. } => written.get(name).cloned().ok_or_else(|| not_found(name)),
        }
    }

    /// The file's length, if it exists.
    pub fn size(&self, name: &str) -> Option<u64> {
        match &self.store {
            Store::Dir { dir, .. } => std::fs::metadata(dir.join(name)).ok().map(|m| m.len()),
            Store::Sim { written, .. } => written.get(name).map(|f| f.len() as u64),
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
            Store::Sim { written, .. } => Ok(written.keys().cloned().collect()),
        }
    }

    pub fn remove(&mut self, name: &str) -> io::Result<()> {
        let reach = self.clock.tick();
        match &mut self.store {
            Store::Dir { dir, open } => {
                open.remove(name);
                std::fs::remove_file(dir.join(name))?;
                File::open(&*dir)?.sync_all()
            }
            Store::Sim { written, durable } => {
                if reach {
                    durable.remove(name);
                }
                written.remove(name).map(drop).ok_or_else(|| not_found(name))
            }
        }
    }

    /// Atomically replaces `to` with `from` (durable on return).
    pub fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        let reach = self.clock.tick();
        match &mut self.store {
            Store::Dir { dir, open } => {
                open.remove(from);
                open.remove(to);
                std::fs::rename(dir.join(from), dir.join(to))?;
                File::open(&*dir)?.sync_all()
            }
            Store::Sim { written, durable } => {
                let f = written.remove(from).ok_or_else(|| not_found(from))?;
                written.insert(to.to_string(), f);
                if reach {
                    match durable.remove(from) {
                        Some(d) => durable.insert(to.to_string(), d),
                        None => durable.remove(to),
                    };
                }
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
        let durable = match &self.store {
            Store::Sim { durable, .. } => durable.clone(),
            Store::Dir { .. } => panic!("Fs::crash needs crash-simulation mode"),
        };
        let store = Store::Sim { written: durable.clone(), durable };
        Fs { store, clock: self.clock.clone(), stats: self.stats.clone(), latency: self.latency }
    }
}

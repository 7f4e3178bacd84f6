//! The data directory: what epochdb keeps where, the locks that make one
//! process its owner, where its log and checkpoint directories are, and
//! removal that touches only what epochdb wrote.
//!
//! ```text
//! DATA/LOCK  manifest  manifest.tmp  pepoch
//! DATA/log/                 data.log  data.log.new  old_data.<e>[.<n>]   (default log directory)
//! DATA/checkpoint/ckpt.<e>/ t<table>.<j>  deletes                     (default checkpoint directory)
//! ```
//!
//! Log and checkpoint directories may live elsewhere (one per disk). The
//! manifest records them, relative to the data directory when inside it,
//! so the data directory can be moved or copied whole; a database opened
//! without naming them uses the recorded ones.
//!
//! Invariants:
//! - Every directory a database writes is locked while it is open: the data
//!   directory by `LOCK`, and each log or checkpoint directory outside it
//!   by a `LOCK` of its own. [`destroy`] takes the same locks before it
//!   touches anything, so it never removes a database that is open.
//! - A file is removed only if its name is one epochdb uses in that kind of
//!   directory and its first bytes are epochdb's header for that name (or
//!   the file is empty, or a temporary cut short by a crash). Anything else
//!   is refused by name, and nothing is removed.

pub(crate) mod inspect;
pub(crate) mod manifest;

use super::datadir::manifest::{absolute, Manifest, MANIFEST_FILE, MANIFEST_MAGIC};
use super::fsio::{Context, Io};
use super::log::logger::{CURRENT_LOG, LOG_MAGIC, NEW_LOG, OLD_LOG_PREFIX, PEPOCH_FILE, PEPOCH_MAGIC};
use crate::error::{Error, Result};
use crate::options::Options;
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "LOCK";
pub const LOG_DIR: &str = "log";
pub const CHECKPOINT_DIR: &str = "checkpoint";
pub const CHECKPOINT_PREFIX: &str = "ckpt.";
pub const CHECKPOINT_MAGIC: &[u8; 8] = b"EPOCHCKP";
pub const DELETES_FILE: &str = "deletes";
const MANIFEST_TMP: &str = "manifest.tmp";

/// The directories of one database, resolved: as the caller spelled them
/// (relative to the working directory, or absolute).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirs {
    pub data: PathBuf,
    pub log: Vec<PathBuf>,
    pub checkpoint: Vec<PathBuf>,
}

impl Dirs {
    /// The directories `options` asks for, checked against those the
    /// manifest records: none given means the recorded ones (or, for a new
    /// database, `DATA/log` and `DATA/checkpoint`); given ones must be the
    /// recorded ones ([`Error::DirectoryMismatch`] names both).
    pub fn resolve(options: &Options, manifest: Option<&Manifest>) -> Result<Dirs> {
        let data = options.data_dir.clone().ok_or(Error::NotDurable)?;
        let pick = |kind, given: &[PathBuf], default: &str, recorded: &[PathBuf]| {
            let recorded: Vec<PathBuf> = recorded.iter().map(|r| data.join(r)).collect();
            match (given.is_empty(), recorded.is_empty()) {
                (true, true) => Ok(vec![data.join(default)]),
                (true, false) => Ok(recorded),
                (false, true) => Ok(given.to_vec()),
                (false, false) if same_dirs(given, &recorded) => Ok(given.to_vec()),
                (false, false) => Err(Error::DirectoryMismatch { kind, recorded, given: given.to_vec() }),
            }
        };
        let none = Vec::new();
        let (log, checkpoint) = manifest.map_or((&none, &none), |m| (&m.log_dirs, &m.checkpoint_dirs));
        Ok(Dirs {
            log: pick("log", &options.log.dirs, LOG_DIR, log)?,
            checkpoint: pick("checkpoint", &options.checkpoint.dirs, CHECKPOINT_DIR, checkpoint)?,
            data,
        })
    }

    /// The checkpoint directories for reading a format-3 manifest, which
    /// did not record them: those given, or the default.
    pub fn legacy_checkpoint(options: &Options, data: &Path) -> Vec<PathBuf> {
        match options.checkpoint.dirs.is_empty() {
            true => vec![data.join(CHECKPOINT_DIR)],
            false => options.checkpoint.dirs.clone(),
        }
    }

    /// The log and checkpoint directories as the manifest records them:
    /// relative to the data directory when inside it, else absolute.
    pub fn recorded(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let data = absolute(&self.data);
        let record = |d: &PathBuf| {
            let abs = absolute(d);
            abs.strip_prefix(&data).map(Path::to_path_buf).unwrap_or(abs)
        };
        (self.log.iter().map(record).collect(), self.checkpoint.iter().map(record).collect())
    }

    /// The data directory, then every log or checkpoint directory outside
    /// it, each once: the directories that get a lock.
    pub fn lockable(&self) -> Vec<PathBuf> {
        let data = absolute(&self.data);
        let mut out = vec![self.data.clone()];
        let mut seen = vec![data.clone()];
        for d in self.log.iter().chain(&self.checkpoint) {
            let abs = absolute(d);
            if !abs.starts_with(&data) && !seen.contains(&abs) {
                seen.push(abs);
                out.push(d.clone());
            }
        }
        out
    }

    /// Creates every directory.
    pub fn create(&self, io: &Io) -> Result<()> {
        for d in std::iter::once(&self.data).chain(&self.log).chain(&self.checkpoint) {
            io.create_dir_all(d)?;
        }
        Ok(())
    }
}

/// Whether two lists name the same directories, in order.
fn same_dirs(a: &[PathBuf], b: &[PathBuf]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| absolute(x) == absolute(y))
}

/// Held locks, released when dropped (the `LOCK` files stay: removing a
/// lock file another process has open would let a third lock a new one).
#[derive(Debug, Default)]
pub struct Locks(Vec<std::fs::File>);

impl Locks {
    pub fn extend(&mut self, other: Locks) {
        self.0.extend(other.0);
    }
}

/// Locks each directory of `dirs` that exists. `exclusive`: for a
/// database that writes (creating `LOCK` files); shared: for a read-only
/// open, which may run beside other readers but not beside a writer, and
/// which skips a directory without a `LOCK` file (nothing has written it
/// since `LOCK` files exist, and a read-only directory cannot get one).
pub fn lock(dirs: &[PathBuf], io: &Io, exclusive: bool) -> Result<Locks> {
    let mut held = Vec::new();
    for dir in dirs {
        let path = dir.join(LOCK_FILE);
        let file = if exclusive {
            if !dir.is_dir() {
                continue;
            }
            io.open_write(&path)?.file
        } else {
            match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::Io { op: "open", path, source: e }),
            }
        };
        let r = if exclusive { file.try_lock() } else { file.try_lock_shared() };
        match r {
            Ok(()) => held.push(file),
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir.clone())),
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::Io { op: "lock", path, source: e }),
        }
    }
    Ok(Locks(held))
}

/// Whether `path` is a log file epochdb wrote (by its header).
pub fn is_log_file(path: &Path) -> Result<bool> {
    has_magic(path, LOG_MAGIC, false)
}

/// The sealed log files (`old_data.*`) in log directory `dir` whose names
/// `wanted` accepts and that epochdb wrote (by their header, read only for
/// those), with their names: what log cleanups may remove, and nothing
/// else in `dir`.
pub fn old_log_files(dir: &Path, wanted: impl Fn(&str) -> bool) -> Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).ctx("read directory", dir)? {
        let name = entry.ctx("read directory", dir)?.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        if name.starts_with(OLD_LOG_PREFIX) && wanted(&name) && is_log_file(&path)? {
            found.push((name, path));
        }
    }
    Ok(found)
}

/// The roles a directory plays, for deciding what in it is epochdb's.
#[derive(Debug, Clone, Copy, Default)]
struct Roles {
    data: bool,
    log: bool,
    checkpoint: bool,
}

/// What an entry of a directory is, to epochdb.
enum Entry {
    /// A file epochdb wrote.
    File,
    /// A directory epochdb made, holding entries of these roles.
    Dir(Roles),
    /// A checkpoint's directory (`ckpt.<e>`).
    CheckpointSet,
    /// A lock file: kept.
    Lock,
}

/// Whether `path` starts as a file with `magic` does: empty, a prefix of
/// the magic, or the magic (a crash or a gradual removal can leave any of
/// these). `zeros`: a temporary preallocated before its header was
/// written may also be all zeros where the header goes.
fn has_magic(path: &Path, magic: &[u8; 8], zeros: bool) -> Result<bool> {
    use std::io::Read;
    let mut head = Vec::new();
    let file = std::fs::File::open(path).ctx("open", path)?;
    file.take(8).read_to_end(&mut head).ctx("read", path)?;
    Ok(magic.starts_with(&head) || (zeros && head.iter().all(|&b| b == 0)))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// What epochdb would have written at `path` (named `name`) in a directory
/// of these roles; `None` if not epochdb's.
fn classify(path: &Path, name: &str, roles: Roles) -> Result<Option<Entry>> {
    let meta = std::fs::symlink_metadata(path).ctx("stat", path)?;
    let (is_dir, is_file) = (meta.is_dir(), meta.is_file());
    let file = |magic: &[u8; 8], zeros: bool| -> Result<Option<Entry>> {
        Ok((is_file && has_magic(path, magic, zeros)?).then_some(Entry::File))
    };
    if name == LOCK_FILE {
        return Ok((is_file && meta.len() == 0).then_some(Entry::Lock));
    }
    if roles.data {
        match name {
            MANIFEST_FILE | MANIFEST_TMP => return file(MANIFEST_MAGIC, false),
            PEPOCH_FILE => return file(PEPOCH_MAGIC, false),
            LOG_DIR if is_dir => return Ok(Some(Entry::Dir(Roles { log: true, ..Roles::default() }))),
            CHECKPOINT_DIR if is_dir => return Ok(Some(Entry::Dir(Roles { checkpoint: true, ..Roles::default() }))),
            _ => {}
        }
    }
    if roles.log {
        if name == CURRENT_LOG {
            return file(LOG_MAGIC, false);
        }
        if name == NEW_LOG {
            return file(LOG_MAGIC, true);
        }
        if let Some(rest) = name.strip_prefix(OLD_LOG_PREFIX) {
            if rest.split('.').count() <= 2 && rest.split('.').all(is_number) {
                return file(LOG_MAGIC, false);
            }
        }
    }
    if roles.checkpoint && is_dir && name.strip_prefix(CHECKPOINT_PREFIX).is_some_and(is_number) {
        return Ok(Some(Entry::CheckpointSet));
    }
    Ok(None)
}

/// What removing a database's files takes, found before anything is
/// removed.
#[derive(Default)]
struct Plan {
    /// Files, in the order to remove them.
    files: Vec<PathBuf>,
    /// Directories epochdb made, deepest first, removed once empty.
    dirs: Vec<PathBuf>,
    /// Directories whose entries are in the plan (absolute).
    visited: Vec<PathBuf>,
}

impl Plan {
    /// Plans the removal of everything epochdb wrote in `known`
    /// (directories with their roles), or fails on the first entry that is
    /// not epochdb's.
    fn of(known: &[(PathBuf, Roles)]) -> Result<Plan> {
        let mut plan = Plan::default();
        for (dir, roles) in known {
            if !plan.visited.contains(&absolute(dir)) {
                plan.add(dir, *roles, known)?;
            }
        }
        // The manifest first: a crash part way leaves no half database
        // that looks whole (logs without their catalog are refused).
        plan.files.sort_by_key(|f| f.file_name().is_none_or(|n| n != MANIFEST_FILE));
        Ok(plan)
    }

    fn add(&mut self, dir: &Path, roles: Roles, known: &[(PathBuf, Roles)]) -> Result<()> {
        self.visited.push(absolute(dir));
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::Io { op: "read directory", path: dir.into(), source: e }),
        };
        let mut names: Vec<String> = Vec::new();
        for e in entries {
            names.push(e.ctx("read directory", dir)?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        for name in names {
            let path = dir.join(&name);
            // A log or checkpoint directory inside this one, by any name.
            let abs = absolute(&path);
            let nested = known.iter().find(|(d, _)| absolute(d) == abs).map(|k| k.1);
            match (nested, classify(&path, &name, roles)?) {
                (Some(inner), Some(Entry::Dir(named))) => self.add_dir(&path, inner.or(named), known)?,
                (Some(inner), None) if path.is_dir() => self.add_dir(&path, inner, known)?,
                (_, None) => return Err(Error::ForeignFile(path)),
                (_, Some(Entry::Lock)) => {}
                (_, Some(Entry::File)) => self.files.push(path),
                (_, Some(Entry::Dir(named))) => self.add_dir(&path, named, known)?,
                (_, Some(Entry::CheckpointSet)) => {
                    for e in std::fs::read_dir(&path).ctx("read directory", &path)? {
                        let e = e.ctx("read directory", &path)?;
                        let (file, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
                        if !checkpoint_file(&file, &name)? {
                            return Err(Error::ForeignFile(file));
                        }
                        self.files.push(file);
                    }
                    self.dirs.push(path);
                }
            }
        }
        Ok(())
    }

    fn add_dir(&mut self, dir: &Path, roles: Roles, known: &[(PathBuf, Roles)]) -> Result<()> {
        self.add(dir, roles, known)?;
        self.dirs.push(dir.into());
        Ok(())
    }
}

impl Roles {
    fn or(self, o: Roles) -> Roles {
        Roles { data: self.data || o.data, log: self.log || o.log, checkpoint: self.checkpoint || o.checkpoint }
    }
}

/// Whether `path`, named `name` in a checkpoint's directory, is a
/// checkpoint file epochdb wrote (`t<id>.<j>`, `deletes`).
fn checkpoint_file(path: &Path, name: &str) -> Result<bool> {
    let named = name == DELETES_FILE
        || name.strip_prefix('t').is_some_and(|r| r.split('.').count() == 2 && r.split('.').all(is_number));
    Ok(named && path.is_file() && has_magic(path, CHECKPOINT_MAGIC, false)?)
}

/// Removes a checkpoint's directory `ckpt.<e>` while the database runs:
/// its epochdb files (`gradually`: see [`Io::remove_gradually`]), then the
/// directory if that left it empty. A file epochdb did not write stays,
/// and so does the directory.
pub fn remove_checkpoint_set(io: &Io, dir: &Path, gradually: bool) -> Result<()> {
    let mut kept = false;
    for e in std::fs::read_dir(dir).ctx("read directory", dir)? {
        let e = e.ctx("read directory", dir)?;
        let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if !checkpoint_file(&path, &name)? {
            kept = true;
        } else if gradually {
            io.remove_gradually(&path)?;
        } else {
            io.remove_file(&path)?;
        }
    }
    if !kept {
        io.remove_dir(dir)?;
    }
    Ok(())
}

/// Directories with the roles each plays.
type Known = Vec<(PathBuf, Roles)>;

/// `Plan::of` before the locks are taken, so that no lock file is made in
/// a directory that is not epochdb's. A database open meanwhile writes and
/// removes files while the plan reads them (a checkpoint half written, a
/// log file gone between listing and reading), so a plan that fails where
/// a lock file exists and is held is [`Error::Locked`]: the database is
/// open, which is what the caller must hear.
fn plan_before_locking(known: &Known, dirs: &Dirs, io: &Io) -> Result<()> {
    let Err(e) = Plan::of(known) else { return Ok(()) };
    for dir in dirs.lockable().into_iter().filter(|d| d.join(LOCK_FILE).is_file()) {
        if let Err(locked @ Error::Locked(_)) = lock(std::slice::from_ref(&dir), io, true) {
            return Err(locked);
        }
    }
    Err(e)
}

/// The directories of the database `options` names (those given and
/// those its manifest records) with the roles each plays; `None` if its
/// data directory does not exist.
fn database_dirs(options: &Options, what: &str) -> Result<Option<(Io, Dirs, Known)>> {
    let data = options.data_dir.clone().ok_or_else(|| Error::InvalidOptions(format!("{what} needs a data_dir")))?;
    if !data.exists() {
        return Ok(None);
    }
    if !data.is_dir() {
        let source = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        return Err(Error::Io { op: "open directory", path: data, source });
    }
    let io = Io::new(options.testing.faults.clone());
    let or_default = |given: &[PathBuf], default: &str| match given.is_empty() {
        true => vec![data.join(default)],
        false => given.to_vec(),
    };
    let mut dirs = Dirs {
        data: data.clone(),
        log: or_default(&options.log.dirs, LOG_DIR),
        checkpoint: or_default(&options.checkpoint.dirs, CHECKPOINT_DIR),
    };
    if let Ok(Some(m)) = Manifest::load(&data, &dirs.checkpoint) {
        dirs.log.extend(m.log_dirs.iter().map(|d| data.join(d)));
        dirs.checkpoint.extend(m.checkpoint_dirs.iter().map(|d| data.join(d)));
    }
    let mut known = vec![(data, Roles { data: true, ..Roles::default() })];
    for (list, role) in [
        (&dirs.log, Roles { log: true, ..Roles::default() }),
        (&dirs.checkpoint, Roles { checkpoint: true, ..Roles::default() }),
    ] {
        for d in list {
            match known.iter_mut().find(|k| absolute(&k.0) == absolute(d)) {
                Some(k) => k.1 = k.1.or(role),
                None => known.push((d.clone(), role)),
            }
        }
    }
    Ok(Some((io, dirs, known)))
}

/// Moves the database `options` names aside, whole, to `to` (a deposed
/// primary keeps its data, which may hold the only copy of commits never
/// released, and rejoins as a new backup). Like [`destroy`]: nothing
/// moves unless every entry is epochdb's ([`Error::ForeignFile`]), and
/// the directories are locked while it moves ([`Error::Locked`] if the
/// database is open anywhere). Its log and checkpoint directories must be
/// inside the data directory, which moves with them. A missing data
/// directory is nothing to move (`Ok(false)`).
pub fn set_aside(options: &Options, to: &Path) -> Result<bool> {
    let Some((io, dirs, known)) = database_dirs(options, "set_aside")? else { return Ok(false) };
    if dirs.lockable().len() > 1 {
        return Err(Error::InvalidOptions(format!(
            "{} has log or checkpoint directories outside it: move them with it by hand",
            dirs.data.display()
        )));
    }
    if to.exists() {
        return Err(Error::InvalidOptions(format!("{} exists already", to.display())));
    }
    plan_before_locking(&known, &dirs, &io)?;
    let _locks = lock(&dirs.lockable(), &io, true)?;
    Plan::of(&known)?;
    io.rename(&dirs.data, to)?;
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        io.sync_dir(parent)?;
    }
    Ok(true)
}

/// Deletes the database `options` names: everything epochdb wrote in its
/// data directory and in its log and checkpoint directories (those given
/// and those its manifest records). Nothing is deleted unless every entry
/// is epochdb's: a file epochdb did not write is [`Error::ForeignFile`].
/// Then it takes the directories' locks, so a database open anywhere is
/// [`Error::Locked`] and untouched. The directories themselves and their
/// `LOCK` files stay. A missing data directory is nothing to delete.
pub fn destroy(options: &Options) -> Result<()> {
    let Some((io, dirs, known)) = database_dirs(options, "destroy")? else { return Ok(()) };
    // Check first (creating no lock file in a directory that is not
    // epochdb's), lock, then plan again: the lock is what makes the plan hold.
    plan_before_locking(&known, &dirs, &io)?;
    let _locks = lock(&dirs.lockable(), &io, true)?;
    let plan = Plan::of(&known)?;
    for f in &plan.files {
        io.remove_file(f)?;
    }
    for d in &plan.dirs {
        // A directory that still holds a lock file of its own stays.
        if std::fs::read_dir(d).ctx("read directory", d)?.next().is_none() {
            io.remove_dir(d)?;
        }
    }
    for (dir, _) in &known {
        if dir.is_dir() {
            io.sync_dir(dir)?;
        }
    }
    Ok(())
}

//! A read-only summary of a data directory, for `epochdb inspect`: what
//! the manifest and pepoch file say, and what each checkpoint and log file
//! holds, block by block (every block's checksum is checked). Damage is
//! listed, not fatal: a summary of a damaged directory is what a user
//! needs to decide what to do.

use crate::durability::datadir::manifest::{Manifest, MANIFEST_FILE};
use crate::durability::datadir::{Dirs, CHECKPOINT_MAGIC};
use crate::durability::frame::{BlockReader, Damage};
use crate::durability::fsio::Context;
use crate::durability::log::logger::{recorded_pepoch, CURRENT_LOG, LOG_MAGIC, OLD_LOG_PREFIX};
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use std::path::{Path, PathBuf};

/// What [`inspect`] found in a data directory, read without changing it.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The recorded pepoch (the pepoch file's, or a single logger's seal
    /// markers' if higher); `None` if the pepoch file is unreadable (see
    /// `problems`).
    pub pepoch: Option<u64>,
    /// Table names; index tables as `table.index`.
    pub tables: Vec<String>,
    /// The log directories in use.
    pub log_dirs: Vec<PathBuf>,
    /// The checkpoint directories in use.
    pub checkpoint_dirs: Vec<PathBuf>,
    /// The installed checkpoint (the newest of its chain).
    pub checkpoint: Option<CheckpointSummary>,
    /// Epoch ranges logged after the last pepoch of a crashed run: recovery ignores them.
    pub void_epochs: Vec<(u64, u64)>,
    /// Every log file, oldest first.
    pub logs: Vec<FileSummary>,
    /// Damage recovery would stop at (or, with salvage, skip): a damaged
    /// block, a checkpoint file of the wrong length, an unreadable pepoch
    /// file. A torn tail a crash left above pepoch is not one: recovery
    /// drops it by itself.
    pub problems: Vec<String>,
}

/// The installed checkpoint.
#[derive(Debug, Clone)]
pub struct CheckpointSummary {
    /// Its `e_l`: recovery replays logs from here.
    pub e_l: u64,
    /// Its `e_h`: the last epoch it may hold records of.
    pub e_h: u64,
    /// Checkpoints of the incremental chain recovery loads with it.
    pub chain: usize,
    /// The files of the chain and of the checkpoint.
    pub files: Vec<FileSummary>,
}

/// One checkpoint or log file.
#[derive(Debug, Clone)]
pub struct FileSummary {
    /// The file.
    pub path: PathBuf,
    /// Its length.
    pub bytes: u64,
    /// Blocks read from it.
    pub blocks: u64,
    /// Epoch range of its blocks (`None` if it has none).
    pub epochs: Option<(u64, u64)>,
    /// The first damage found, if any.
    pub damage: Option<String>,
    /// Holds only epochs below the checkpoint's `e_l`: recovery skips it,
    /// the next checkpoint removes it, and it is not read here (a crash
    /// may have left it half removed).
    pub obsolete: bool,
}

/// Summarizes the database in `data_dir`, with logs in `log_dirs` (empty:
/// the ones its manifest records). Reads only. An error if `data_dir` is
/// missing, not a directory, or holds no database.
pub fn inspect(data_dir: &Path, log_dirs: &[PathBuf]) -> Result<Inspection> {
    let meta = std::fs::metadata(data_dir).ctx("open data directory", data_dir)?;
    if !meta.is_dir() {
        let source = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        return Err(Error::Io { op: "open data directory", path: data_dir.into(), source });
    }
    if !data_dir.join(MANIFEST_FILE).is_file() {
        return Err(Error::NotADatabase(data_dir.into()));
    }
    let options = Options {
        durability: Durability::Log,
        data_dir: Some(data_dir.into()),
        log: crate::options::LogOptions { dirs: log_dirs.to_vec(), ..Default::default() },
        ..Options::default()
    };
    let legacy = Dirs::legacy_checkpoint(&options, data_dir);
    let manifest = Manifest::load(data_dir, &legacy).map_err(|d| d.error(None))?.unwrap_or_default();
    let dirs = Dirs::resolve(&options, Some(&manifest))?;
    let mut problems = Vec::new();
    let pepoch = recorded_pepoch(data_dir, &dirs.log).unwrap_or_else(|d| {
        problems.push(d.to_string());
        None
    });
    let checkpoint = manifest.checkpoint.as_ref().map(|c| {
        let mut files = Vec::new();
        for f in manifest.checkpoints().flat_map(|c| &c.files) {
            let (s, _) = summarize(&f.path(&dirs.checkpoint), CHECKPOINT_MAGIC);
            if s.bytes != f.len {
                problems.push(format!("{}: {} bytes; the manifest says {}", s.path.display(), s.bytes, f.len));
            }
            problems.extend(s.damage.clone());
            files.push(s);
        }
        CheckpointSummary { e_l: c.e_l, e_h: c.e_h, chain: manifest.chain.len() + 1, files }
    });
    let e_l = manifest.checkpoint.as_ref().map_or(0, |c| c.e_l);
    let mut logs = Vec::new();
    for dir in &dirs.log {
        let entries = std::fs::read_dir(dir).ctx("read log directory", dir)?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().is_some_and(|n| n == CURRENT_LOG || n.to_string_lossy().starts_with(OLD_LOG_PREFIX))
            })
            .collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if crate::durability::recovery::below_checkpoint(&name, e_l) {
                let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
                logs.push(FileSummary { path, bytes, blocks: 0, epochs: None, damage: None, obsolete: true });
                continue;
            }
            let (mut s, damage) = summarize(&path, LOG_MAGIC);
            // What recovery drops by itself (recovery.rs states the rule):
            // damage whose intact header is above pepoch, anywhere, and a
            // never-written block at the end of a crashed data.log.
            let above = |d: &Damage| d.epochs.is_some_and(|(lo, _)| pepoch.is_some_and(|p| lo > p));
            let harmless = damage.is_some_and(|d| above(&d) || (name == CURRENT_LOG && d.at_tail && d.zeroed));
            match (harmless, &s.damage) {
                (true, Some(d)) => s.damage = Some(format!("{d} (above pepoch or never written: recovery drops it)")),
                _ => problems.extend(s.damage.clone()),
            }
            logs.push(s);
        }
    }
    Ok(Inspection {
        pepoch,
        tables: manifest.tables.iter().map(|t| t.name.clone()).collect(),
        log_dirs: dirs.log,
        checkpoint_dirs: dirs.checkpoint,
        checkpoint,
        void_epochs: manifest.voids,
        logs,
        problems,
    })
}

/// Reads every block of one file; returns its summary and its first
/// damage.
fn summarize(path: &Path, magic: &[u8; 8]) -> (FileSummary, Option<Damage>) {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut s = FileSummary { path: path.into(), bytes, blocks: 0, epochs: None, damage: None, obsolete: false };
    let mut reader = match BlockReader::open(path, magic) {
        Ok(r) => r,
        Err(d) => {
            s.damage = Some(d.to_string());
            return (s, Some(d));
        }
    };
    let mut payload = Vec::new();
    loop {
        match reader.next_block(&mut payload) {
            Ok(Some((_, lo, hi))) => {
                s.blocks += 1;
                s.epochs = Some(s.epochs.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            }
            Ok(None) => return (s, None),
            Err(d) => {
                s.damage = Some(d.to_string());
                return (s, Some(d));
            }
        }
    }
}

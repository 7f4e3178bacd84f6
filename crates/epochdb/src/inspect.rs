//! A read-only summary of a data directory, for `epochdb inspect`: what
//! the manifest and pepoch file say, and what each log file holds.

use crate::error::Result;
use crate::frame::BlockReader;
use crate::logger::{PepochFile, CURRENT_LOG, LOG_MAGIC, OLD_LOG_PREFIX};
use crate::manifest::Manifest;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Inspection {
    pub pepoch: Option<u64>,
    /// Table names; index tables as `table.index`.
    pub tables: Vec<String>,
    pub checkpoint: Option<CheckpointSummary>,
    pub void_epochs: Vec<(u64, u64)>,
    pub logs: Vec<LogFileSummary>,
}

/// The installed checkpoint.
#[derive(Debug, Clone)]
pub struct CheckpointSummary {
    pub e_l: u64,
    pub e_h: u64,
    /// Its files, with their lengths.
    pub files: Vec<(PathBuf, u64)>,
}

#[derive(Debug, Clone)]
pub struct LogFileSummary {
    pub path: PathBuf,
    pub bytes: u64,
    pub blocks: u64,
    /// Epoch range of its blocks (`None` if it has none).
    pub epochs: Option<(u64, u64)>,
    /// The first damage found, if any (a torn tail of `data.log` after a
    /// crash is expected and dropped at recovery).
    pub damage: Option<String>,
    /// Holds only epochs below the checkpoint's `e_l`: recovery skips it,
    /// the next checkpoint removes it, and it is not read here (a crash
    /// may have left it half removed).
    pub obsolete: bool,
}

/// Summarizes the data directory `data_dir` with logs in `log_dirs`
/// (empty: `data_dir/log`). Reads only.
pub fn inspect(data_dir: &Path, log_dirs: &[PathBuf]) -> Result<Inspection> {
    let manifest = Manifest::load(data_dir)?.unwrap_or_default();
    let pepoch = PepochFile::read(data_dir)?;
    let dirs = if log_dirs.is_empty() { vec![data_dir.join("log")] } else { log_dirs.to_vec() };
    let mut logs = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().is_some_and(|n| n == CURRENT_LOG || n.to_string_lossy().starts_with(OLD_LOG_PREFIX))
            })
            .collect();
        paths.sort();
        let e_l = manifest.checkpoint.as_ref().map_or(0, |c| c.e_l);
        for path in paths {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if crate::recovery::below_checkpoint(&name, e_l) {
                let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
                logs.push(LogFileSummary { path, bytes, blocks: 0, epochs: None, damage: None, obsolete: true });
            } else {
                logs.push(summarize(&path));
            }
        }
    }
    Ok(Inspection {
        pepoch,
        tables: manifest.tables.iter().map(|t| t.name.clone()).collect(),
        checkpoint: manifest.checkpoint.map(|c| CheckpointSummary { e_l: c.e_l, e_h: c.e_h, files: c.files }),
        void_epochs: manifest.voids,
        logs,
    })
}

fn summarize(path: &Path) -> LogFileSummary {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut s = LogFileSummary { path: path.into(), bytes, blocks: 0, epochs: None, damage: None, obsolete: false };
    let mut reader = match BlockReader::open(path, LOG_MAGIC) {
        Ok(r) => r,
        Err(d) => {
            s.damage = Some(d.to_string());
            return s;
        }
    };
    let mut payload = Vec::new();
    loop {
        match reader.next_block(&mut payload) {
            Ok(Some((_, lo, hi))) => {
                s.blocks += 1;
                s.epochs = Some(s.epochs.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            }
            Ok(None) => return s,
            Err(d) => {
                s.damage = Some(d.to_string());
                return s;
            }
        }
    }
}

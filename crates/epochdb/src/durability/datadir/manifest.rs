//! The manifest: the one file that says what a data directory holds — the
//! catalog (table names and ids, which tables are secondary indexes of
//! which, their schemas), the log and checkpoint directories, the
//! installed checkpoint (its epochs and files) and the epoch ranges that
//! crashed runs logged but never made durable. It is replaced atomically
//! (temporary file, sync, rename, directory sync).
//!
//! Nothing in it depends on the working directory of the process that
//! wrote it: directories inside the data directory are recorded relative
//! to it, and checkpoint files relative to their checkpoint directory, so
//! a data directory can be moved, copied and restored from a backup.
//! Manifests of format 3 and older recorded checkpoint files by the path
//! the creating process used; [`Manifest::load`] reads them too.

use crate::catalog::{Column, ColumnType, Schema};
use crate::durability::frame::{self, BlockReader, Damage};
use crate::durability::fsio::Io;
use crate::error::Result;
use std::path::{Component, Path, PathBuf};

pub const MANIFEST_FILE: &str = "manifest";
pub const MANIFEST_MAGIC: &[u8; 8] = b"EPOCHMAN";
/// The first format version that records directories and relative names.
const RELATIVE_PATHS: u32 = 4;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Indexed by table id.
    pub tables: Vec<TableEntry>,
    pub checkpoint: Option<CheckpointInfo>,
    /// With incremental checkpoints (Gawain §3): the chain's earlier
    /// checkpoints, oldest first; `checkpoint` is its newest. Recovery loads
    /// them all.
    pub chain: Vec<CheckpointInfo>,
    /// `(lo, hi)`: log records with epochs in `lo..=hi` are void. A crash
    /// left them on disk above pepoch; recovery ignored them, and new epochs
    /// start above `hi`, so they must stay ignored.
    pub voids: Vec<(u64, u64)>,
    /// The log directories, in logger order: relative to the data directory
    /// when inside it, else absolute. Empty in a manifest of format 3 or
    /// older, which did not record them.
    pub log_dirs: Vec<PathBuf>,
    /// The checkpoint directories, recorded the same way.
    pub checkpoint_dirs: Vec<PathBuf>,
    /// The promotions in this database's history, oldest first: each
    /// began a new term (replication's failover).
    pub promotions: Vec<Promotion>,
}

/// A backup became the primary (or a replication primary restarted): it
/// kept the epochs `<= kept` it had persisted, made `kept + 1 ..= first - 1`
/// void, and numbered the new term's epochs from `first`. `id` is random:
/// two terms begun apart (a primary restarting while a backup is promoted)
/// may share their count and `first`, never their id (0: recorded before
/// ids were).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promotion {
    /// The last epoch of the old term it kept.
    pub kept: u64,
    /// The first epoch of its term.
    pub first: u64,
    /// Tells this term from any other with the same count and `first`.
    pub id: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    pub name: String,
    /// For a secondary index's table: the table it indexes, and the
    /// index's name.
    pub index_of: Option<(u32, String)>,
    /// The column schema, which recovery needs to apply delta log entries.
    pub schema: Option<Schema>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Records with epochs `>= e_l` were left to the log.
    pub e_l: u64,
    /// The epoch when the checkpoint finished; installed once `e_h <= pepoch`.
    pub e_h: u64,
    /// Every checkpoint file with its length.
    pub files: Vec<CheckpointFile>,
}

/// A checkpoint file: which checkpoint directory holds it, and its name
/// there (`ckpt.<e_l>/t<table>.<j>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFile {
    pub dir: u32,
    pub name: PathBuf,
    pub len: u64,
}

impl CheckpointFile {
    /// Its path, given the checkpoint directories in use.
    pub fn path(&self, checkpoint_dirs: &[PathBuf]) -> PathBuf {
        checkpoint_dirs.get(self.dir as usize).map_or_else(|| self.name.clone(), |d| d.join(&self.name))
    }
}

impl Manifest {
    /// Every checkpoint recovery loads: the chain, then the newest.
    pub fn checkpoints(&self) -> impl Iterator<Item = &CheckpointInfo> {
        self.chain.iter().chain(&self.checkpoint)
    }

    pub fn is_void(&self, epoch: u64) -> bool {
        self.voids.iter().any(|&(lo, hi)| lo <= epoch && epoch <= hi)
    }

    /// The term (promotions so far) and the first epoch of its newest, 0
    /// before any.
    pub fn term(&self) -> (u32, u64) {
        (self.promotions.len() as u32, self.promotions.last().map_or(0, |p| p.first))
    }

    /// The newest promotion's id (0 before any): with [`Manifest::term`],
    /// what a backup says of its history in its hello.
    pub fn term_id(&self) -> u64 {
        self.promotions.last().map_or(0, |p| p.id)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Encoder(Vec::new());
        b.u32(self.tables.len() as u32);
        for t in &self.tables {
            b.str(&t.name);
            let (parent, index) = t.index_of.as_ref().map_or((u32::MAX, ""), |(p, n)| (*p, n.as_str()));
            b.u32(parent);
            b.str(index);
        }
        match &self.checkpoint {
            None => b.0.push(0),
            Some(c) => {
                b.0.push(1);
                b.checkpoint(c);
            }
        }
        b.u32(self.voids.len() as u32);
        for (lo, hi) in &self.voids {
            b.u64(*lo);
            b.u64(*hi);
        }
        let schemas: Vec<_> =
            self.tables.iter().enumerate().filter_map(|(i, t)| Some((i, t.schema.as_ref()?))).collect();
        b.u32(schemas.len() as u32);
        for (i, schema) in schemas {
            b.u32(i as u32);
            b.u32(schema.columns().len() as u32);
            for c in schema.columns() {
                b.str(&c.name);
                let (kind, len) = match c.ty {
                    ColumnType::Fixed(n) => (0u8, n),
                    ColumnType::Var(max) => (1u8, max),
                };
                b.0.push(kind);
                b.0.extend_from_slice(&len.to_le_bytes());
            }
        }
        b.u32(self.chain.len() as u32);
        for c in &self.chain {
            b.checkpoint(c);
        }
        for dirs in [&self.log_dirs, &self.checkpoint_dirs] {
            b.u32(dirs.len() as u32);
            for d in dirs {
                b.str(&d.to_string_lossy());
            }
        }
        // Only after a promotion, so other manifests read as before.
        if !self.promotions.is_empty() {
            b.u32(self.promotions.len() as u32);
            for p in &self.promotions {
                b.u64(p.kept);
                b.u64(p.first);
            }
            // Added later, after the list, so older readers' manifests read.
            b.u32(self.promotions.len() as u32);
            for p in &self.promotions {
                b.u64(p.id);
            }
        }
        b.0
    }

    /// Decodes what [`Manifest::encode`] made in this build (a primary's
    /// manifest on the replication wire); `None` if it is not one.
    pub fn decode_current(p: &[u8]) -> Option<Manifest> {
        Manifest::decode(p, frame::VERSION, &|path, len| CheckpointFile { dir: u32::MAX, name: path, len })
    }

    /// Decodes a payload of format `version`; a format-3 (or older)
    /// checkpoint file is given as the path it records, which
    /// `legacy_file` turns into a [`CheckpointFile`].
    fn decode(p: &[u8], version: u32, legacy_file: &dyn Fn(PathBuf, u64) -> CheckpointFile) -> Option<Manifest> {
        let mut d = Decoder(p);
        let mut m = Manifest::default();
        for _ in 0..d.u32()? {
            let name = d.str()?;
            let parent = d.u32()?;
            let index = d.str()?;
            m.tables.push(TableEntry { name, index_of: (parent != u32::MAX).then_some((parent, index)), schema: None });
        }
        let checkpoint = |d: &mut Decoder<'_>| {
            let (e_l, e_h) = (d.epoch()?, d.epoch()?);
            let mut files = Vec::new();
            for _ in 0..d.u32()? {
                files.push(if version >= RELATIVE_PATHS {
                    let dir = d.u32()?;
                    let name = PathBuf::from(d.str()?);
                    CheckpointFile { dir, name, len: d.u64()? }
                } else {
                    let path = PathBuf::from(d.str()?);
                    legacy_file(path, d.u64()?)
                });
            }
            Some(CheckpointInfo { e_l, e_h, files })
        };
        if d.take(1)?[0] == 1 {
            m.checkpoint = Some(checkpoint(&mut d)?);
        }
        for _ in 0..d.u32()? {
            let (lo, hi) = (d.epoch()?, d.epoch()?);
            m.voids.push((lo, hi));
        }
        if d.0.is_empty() && version < RELATIVE_PATHS {
            return Some(m); // written before schemas were stored
        }
        for _ in 0..d.u32()? {
            let table = d.u32()? as usize;
            let mut columns = Vec::new();
            for _ in 0..d.u32()? {
                let name = d.str()?;
                let kind = d.take(1)?[0];
                let len = d.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))?;
                let ty = match kind {
                    0 => ColumnType::Fixed(len),
                    1 => ColumnType::Var(len),
                    _ => return None,
                };
                columns.push(Column { name, ty });
            }
            m.tables.get_mut(table)?.schema = Some(Schema::new(columns).ok()?);
        }
        for _ in 0..d.u32()? {
            m.chain.push(checkpoint(&mut d)?);
        }
        if version >= RELATIVE_PATHS {
            for dirs in [&mut m.log_dirs, &mut m.checkpoint_dirs] {
                for _ in 0..d.u32()? {
                    dirs.push(PathBuf::from(d.str()?));
                }
            }
            if !d.0.is_empty() {
                for _ in 0..d.u32()? {
                    m.promotions.push(Promotion { kept: d.epoch()?, first: d.epoch()?, id: 0 });
                }
                if !d.0.is_empty() {
                    if d.u32()? as usize != m.promotions.len() {
                        return None;
                    }
                    for p in &mut m.promotions {
                        p.id = d.u64()?;
                    }
                }
            }
        }
        d.0.is_empty().then_some(m)
    }

    /// Writes the manifest into `dir`, atomically.
    pub fn store(&self, dir: &Path, io: &Io) -> Result<()> {
        let mut bytes = frame::file_header(MANIFEST_MAGIC).to_vec();
        let mut block = frame::new_block(0);
        block.extend_from_slice(&self.encode());
        frame::seal(&mut block, 0, 0);
        bytes.extend_from_slice(&block);
        io.replace_file(&dir.join(MANIFEST_FILE), &bytes)
    }

    /// Reads the manifest in `dir`; `Ok(None)` if there is none. A manifest
    /// of format 3 or older named checkpoint files by the path its process
    /// used; each is found again under one of `checkpoint_dirs` (the
    /// directories in use, which such a manifest did not record).
    pub fn load(dir: &Path, checkpoint_dirs: &[PathBuf]) -> Result<Option<Manifest>, Damage> {
        let path = dir.join(MANIFEST_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let mut r = BlockReader::open(&path, MANIFEST_MAGIC)?;
        let mut payload = Vec::new();
        let bad = |what: &str| Damage::of_file(&path, what.into());
        let legacy = |p: PathBuf, len: u64| legacy_file(p, len, checkpoint_dirs);
        match r.next_block(&mut payload)? {
            Some(_) => {
                Manifest::decode(&payload, r.version(), &legacy).map(Some).ok_or_else(|| bad("undecodable manifest"))
            }
            None => Err(bad("empty manifest")),
        }
    }
}

/// A checkpoint file of a format-3 manifest, recorded as `path`: under the
/// checkpoint directory that holds it, as spelled if that still names it,
/// else the one directory that holds its last two components
/// (`ckpt.<e>/<file>`). If none does, it stays as recorded, and recovery
/// reports it missing.
fn legacy_file(path: PathBuf, len: u64, checkpoint_dirs: &[PathBuf]) -> CheckpointFile {
    let spelled = absolute(&path);
    for (i, d) in checkpoint_dirs.iter().enumerate() {
        if let Ok(rest) = spelled.strip_prefix(absolute(d)) {
            if path.exists() {
                return CheckpointFile { dir: i as u32, name: rest.into(), len };
            }
        }
    }
    let n = path.components().count();
    let tail: PathBuf = path.components().skip(n.saturating_sub(2)).collect();
    let holders: Vec<usize> = (0..checkpoint_dirs.len()).filter(|&i| checkpoint_dirs[i].join(&tail).exists()).collect();
    match holders[..] {
        [i] => CheckpointFile { dir: i as u32, name: tail, len },
        _ => CheckpointFile { dir: u32::MAX, name: path, len },
    }
}

/// `p` made absolute and cleaned of `.` and `..` without touching the file
/// system beyond the working directory (symbolic links are resolved where
/// the path exists).
pub fn absolute(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let joined = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(p) };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Appends little-endian fields.
struct Encoder(Vec<u8>);

impl Encoder {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn checkpoint(&mut self, c: &CheckpointInfo) {
        self.u64(c.e_l);
        self.u64(c.e_h);
        self.u32(c.files.len() as u32);
        for f in &c.files {
            self.u32(f.dir);
            self.str(&f.name.to_string_lossy());
            self.u64(f.len);
        }
    }
}

/// Takes little-endian fields; `None` past the end (every loop above
/// takes bytes each time round, so a corrupt count cannot run long or
/// allocate more than the payload's size).
struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        (self.0.len() >= n).then(|| {
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            a
        })
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
    }

    /// An epoch: a u64 no larger than a TID holds.
    fn epoch(&mut self) -> Option<u64> {
        self.u64().filter(|&e| e <= crate::tid::MAX_EPOCH)
    }

    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        self.take(n).and_then(|b| String::from_utf8(b.to_vec()).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            tables: vec![
                TableEntry {
                    name: "t".into(),
                    index_of: None,
                    schema: Some(Schema::new(vec![Column::fixed("a", 4), Column::var("b", 9)]).expect("schema")),
                },
                TableEntry { name: "t.by_x".into(), index_of: Some((0, "by_x".into())), schema: None },
            ],
            checkpoint: Some(CheckpointInfo {
                e_l: 5,
                e_h: 9,
                files: vec![CheckpointFile { dir: 0, name: "ckpt.5/t0.0".into(), len: 123 }],
            }),
            chain: vec![CheckpointInfo {
                e_l: 2,
                e_h: 3,
                files: vec![CheckpointFile { dir: 1, name: "ckpt.2/t0.0".into(), len: 45 }],
            }],
            voids: vec![(10, 12)],
            log_dirs: vec!["log".into(), "/disk2/log".into()],
            checkpoint_dirs: vec!["checkpoint".into(), "/disk2/ckpt".into()],
            promotions: Vec::new(),
        }
    }

    /// Promotions round-trip, and a manifest without any encodes as one
    /// from before promotions existed.
    #[test]
    fn promotions_round_trip_and_are_absent_until_the_first() {
        let before = sample().encode();
        let mut m = sample();
        m.promotions = vec![Promotion { kept: 40, first: 48, id: 7 }, Promotion { kept: 90, first: 96, id: 9 }];
        let after = m.encode();
        assert_eq!(after.len(), before.len() + 4 + 2 * 16 + 4 + 2 * 8);
        assert_eq!(Manifest::decode_current(&after), Some(m));
        assert_eq!(Manifest::decode_current(&before), Some(sample()));
    }

    #[test]
    fn round_trips_through_a_file() {
        let dir = std::env::temp_dir().join(format!("epochdb-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(Manifest::load(&dir, &[]).expect("none"), None);
        let m = sample();
        m.store(&dir, &Io::default()).expect("store");
        assert_eq!(Manifest::load(&dir, &[]).expect("load"), Some(m.clone()));
        assert!(m.is_void(11) && !m.is_void(13));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A format-3 manifest recorded `files` as paths; the reader finds them
    /// under the checkpoint directory in use, wherever the data directory
    /// now is.
    #[test]
    fn a_format_3_manifest_finds_its_checkpoint_files_after_a_move() {
        let dir = std::env::temp_dir().join(format!("epochdb-manifest-v3-{}", std::process::id()));
        let ckpt = dir.join("moved/checkpoint");
        std::fs::create_dir_all(ckpt.join("ckpt.5")).expect("dir");
        std::fs::write(ckpt.join("ckpt.5/t0.0"), b"x").expect("file");
        // Format 3's payload: no directories, files as recorded paths.
        let mut b = Encoder(Vec::new());
        b.u32(0); // tables
        b.0.push(1);
        b.u64(5);
        b.u64(9);
        b.u32(1);
        b.str("epochdb-data/checkpoint/ckpt.5/t0.0");
        b.u64(1);
        b.u32(0); // voids
        b.u32(0); // schemas
        b.u32(0); // chain
        let m = Manifest::decode(&b.0, 3, &|p, len| legacy_file(p, len, std::slice::from_ref(&ckpt))).expect("decode");
        let files = &m.checkpoint.expect("checkpoint").files;
        assert_eq!(files, &[CheckpointFile { dir: 0, name: "ckpt.5/t0.0".into(), len: 1 }]);
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! The manifest: the one file that says what a data directory holds — the
//! catalog (table names and ids, which tables are secondary indexes of
//! which), the installed checkpoint (its epochs and files) and the epoch
//! ranges that crashed runs logged but never made durable. It is replaced
//! atomically (temporary file, sync, rename, directory sync).

use crate::catalog::{Column, ColumnType, Schema};
use crate::frame::{self, BlockReader, Damage};
use crate::fsio::Io;
use std::path::{Path, PathBuf};

pub const MANIFEST_FILE: &str = "manifest";
pub const MANIFEST_MAGIC: &[u8; 8] = b"EPOCHMAN";

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
    pub files: Vec<(PathBuf, u64)>,
}

impl Manifest {
    /// Every checkpoint recovery loads: the chain, then the newest.
    pub fn checkpoints(&self) -> impl Iterator<Item = &CheckpointInfo> {
        self.chain.iter().chain(&self.checkpoint)
    }

    pub fn is_void(&self, epoch: u64) -> bool {
        self.voids.iter().any(|&(lo, hi)| lo <= epoch && epoch <= hi)
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let str = |b: &mut Vec<u8>, s: &str| {
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        b.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for t in &self.tables {
            str(&mut b, &t.name);
            let (parent, index) = t.index_of.as_ref().map_or((u32::MAX, ""), |(p, n)| (*p, n.as_str()));
            b.extend_from_slice(&parent.to_le_bytes());
            str(&mut b, index);
        }
        let checkpoint = |b: &mut Vec<u8>, c: &CheckpointInfo| {
            b.extend_from_slice(&c.e_l.to_le_bytes());
            b.extend_from_slice(&c.e_h.to_le_bytes());
            b.extend_from_slice(&(c.files.len() as u32).to_le_bytes());
            for (p, len) in &c.files {
                str(b, &p.to_string_lossy());
                b.extend_from_slice(&len.to_le_bytes());
            }
        };
        match &self.checkpoint {
            None => b.push(0),
            Some(c) => {
                b.push(1);
                checkpoint(&mut b, c);
            }
        }
        b.extend_from_slice(&(self.voids.len() as u32).to_le_bytes());
        for (lo, hi) in &self.voids {
            b.extend_from_slice(&lo.to_le_bytes());
            b.extend_from_slice(&hi.to_le_bytes());
        }
        // Schemas come last, so that a manifest written before they were
        // stored still decodes (as tables without one).
        let schemas: Vec<_> =
            self.tables.iter().enumerate().filter_map(|(i, t)| Some((i, t.schema.as_ref()?))).collect();
        b.extend_from_slice(&(schemas.len() as u32).to_le_bytes());
        for (i, schema) in schemas {
            b.extend_from_slice(&(i as u32).to_le_bytes());
            b.extend_from_slice(&(schema.columns().len() as u32).to_le_bytes());
            for c in schema.columns() {
                str(&mut b, &c.name);
                let (kind, len) = match c.ty {
                    ColumnType::Fixed(n) => (0u8, n),
                    ColumnType::Var(max) => (1u8, max),
                };
                b.push(kind);
                b.extend_from_slice(&len.to_le_bytes());
            }
        }
        b.extend_from_slice(&(self.chain.len() as u32).to_le_bytes());
        for c in &self.chain {
            checkpoint(&mut b, c);
        }
        b
    }

    fn decode(mut p: &[u8]) -> Option<Manifest> {
        fn take<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
            (p.len() >= n).then(|| {
                let (a, b) = p.split_at(n);
                *p = b;
                a
            })
        }
        let u32_ = |p: &mut &[u8]| take(p, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let u64_ = |p: &mut &[u8]| take(p, 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let str_ = |p: &mut &[u8]| {
            let n = u32_(p)? as usize;
            take(p, n).and_then(|b| String::from_utf8(b.to_vec()).ok())
        };
        let mut m = Manifest::default();
        for _ in 0..u32_(&mut p)? {
            let name = str_(&mut p)?;
            let parent = u32_(&mut p)?;
            let index = str_(&mut p)?;
            m.tables.push(TableEntry { name, index_of: (parent != u32::MAX).then_some((parent, index)), schema: None });
        }
        let checkpoint = |p: &mut &[u8]| {
            let (e_l, e_h) = (u64_(p)?, u64_(p)?);
            let mut files = Vec::new();
            for _ in 0..u32_(p)? {
                files.push((PathBuf::from(str_(p)?), u64_(p)?));
            }
            Some(CheckpointInfo { e_l, e_h, files })
        };
        if take(&mut p, 1)?[0] == 1 {
            m.checkpoint = Some(checkpoint(&mut p)?);
        }
        for _ in 0..u32_(&mut p)? {
            m.voids.push((u64_(&mut p)?, u64_(&mut p)?));
        }
        if p.is_empty() {
            return Some(m); // written before schemas were stored
        }
        for _ in 0..u32_(&mut p)? {
            let table = u32_(&mut p)? as usize;
            let mut columns = Vec::new();
            for _ in 0..u32_(&mut p)? {
                let name = str_(&mut p)?;
                let kind = take(&mut p, 1)?[0];
                let len = take(&mut p, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))?;
                let ty = match kind {
                    0 => ColumnType::Fixed(len),
                    1 => ColumnType::Var(len),
                    _ => return None,
                };
                columns.push(Column { name, ty });
            }
            m.tables.get_mut(table)?.schema = Some(Schema::new(columns).ok()?);
        }
        for _ in 0..u32_(&mut p)? {
            m.chain.push(checkpoint(&mut p)?);
        }
        p.is_empty().then_some(m)
    }

    /// Writes the manifest into `dir`, atomically.
    pub fn store(&self, dir: &Path, io: &Io) -> std::io::Result<()> {
        let mut bytes = frame::file_header(MANIFEST_MAGIC).to_vec();
        let mut block = frame::new_block(0);
        block.extend_from_slice(&self.encode());
        frame::seal(&mut block, 0, 0);
        bytes.extend_from_slice(&block);
        io.replace_file(&dir.join(MANIFEST_FILE), &bytes)
    }

    /// Reads the manifest in `dir`; `Ok(None)` if there is none.
    pub fn load(dir: &Path) -> Result<Option<Manifest>, Damage> {
        let path = dir.join(MANIFEST_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let mut r = BlockReader::open(&path, MANIFEST_MAGIC)?;
        let mut payload = Vec::new();
        let bad = |what: &str| Damage { path: path.clone(), offset: 0, at_tail: false, what: what.into() };
        match r.next_block(&mut payload)? {
            Some(_) => Manifest::decode(&payload).map(Some).ok_or_else(|| bad("undecodable manifest")),
            None => Err(bad("empty manifest")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_a_file() {
        let dir = std::env::temp_dir().join(format!("epochdb-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(Manifest::load(&dir).expect("none"), None);
        let m = Manifest {
            tables: vec![
                TableEntry {
                    name: "t".into(),
                    index_of: None,
                    schema: Some(Schema::new(vec![Column::fixed("a", 4), Column::var("b", 9)]).expect("schema")),
                },
                TableEntry { name: "t.by_x".into(), index_of: Some((0, "by_x".into())), schema: None },
            ],
            checkpoint: Some(CheckpointInfo { e_l: 5, e_h: 9, files: vec![("c/t0.0".into(), 123)] }),
            chain: vec![CheckpointInfo { e_l: 2, e_h: 3, files: vec![("c/t0.0".into(), 45)] }],
            voids: vec![(10, 12)],
        };
        m.store(&dir, &Io::default()).expect("store");
        assert_eq!(Manifest::load(&dir).expect("load"), Some(m.clone()));
        assert!(m.is_void(11) && !m.is_void(13));
        std::fs::remove_dir_all(&dir).ok();
    }
}

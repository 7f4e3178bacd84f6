//! The write-ahead log of the traditional engines on the file interface
//! (InP §3.1, Log §3.3): committed transactions' records collect in a
//! group, and the group becomes durable together when its block is
//! appended to the current segment `wal.<s>` and fsynced (group commit).
//!
//! A block is its length, the CRC32C of its records, and the records
//! (FORMAT.md, "InP files"). Replay stops at the first torn block, which
//! only the newest segment may have.
//!
//! Both engines also keep their tables' names and columns in a `catalog`
//! file, read and written here.

use crate::pmem::Fs;
use crate::store::{corrupt, Result};
use std::time::{Duration, Instant};

/// How long a group may collect commits before it is written.
pub const GROUP_COMMIT: Duration = Duration::from_millis(10);
/// A group is also written once its block reaches this size.
const GROUP_BYTES: usize = 1 << 20;

/// The tables in the `catalog` file (none if there is none yet).
pub fn read_catalog(fs: &Fs) -> Result<Vec<(String, Vec<u16>)>> {
    let Ok(cat) = fs.read("catalog") else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&cat).lines() {
        let (name, cols) = line.split_once('\t').ok_or_else(|| corrupt("catalog: bad line"))?;
        let cols =
            cols.split(',').filter(|c| !c.is_empty()).map(|c| c.parse().map_err(|_| corrupt("catalog: bad column")));
        out.push((name.to_string(), cols.collect::<Result<Vec<u16>>>()?));
    }
    Ok(out)
}

/// Replaces the `catalog` file: one line per table, name TAB columns.
pub fn write_catalog<'t>(fs: &mut Fs, tables: impl Iterator<Item = (&'t str, &'t [u16])>) -> Result {
    let mut text = String::new();
    for (name, cols) in tables {
        let cols: Vec<String> = cols.iter().map(u16::to_string).collect();
        text.push_str(&format!("{name}\t{}\n", cols.join(",")));
    }
    fs.replace("catalog", text.as_bytes())
}

/// The number in a file name `<prefix><n>`.
pub fn segment_of(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// A reader of length-prefixed records; errors name the file.
pub struct Cursor<'a> {
    pub b: &'a [u8],
    pub at: usize,
    pub file: &'a str,
}

impl<'a> Cursor<'a> {
    pub fn new(b: &'a [u8], file: &'a str) -> Cursor<'a> {
        Cursor { b, at: 0, file }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self.b.get(self.at..self.at + n).ok_or_else(|| corrupt(format!("{}: truncated record", self.file)))?;
        self.at += n;
        Ok(s)
    }
    pub fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn done(&self) -> bool {
        self.at >= self.b.len()
    }
}

/// The group being collected and the segment it goes to.
#[derive(Default)]
pub struct GroupLog {
    /// The segment being appended to.
    pub segment: u64,
    group: Vec<u8>,
    started: Option<Instant>,
    committed: u64,
    durable: u64,
}

impl GroupLog {
    /// A committed transaction's records join the group; true if the group
    /// is due to be written.
    pub fn commit(&mut self, records: &mut Vec<u8>) -> bool {
        self.committed += 1;
        self.group.append(records);
        let now = Instant::now();
        let started = *self.started.get_or_insert(now);
        now - started >= GROUP_COMMIT || self.group.len() >= GROUP_BYTES
    }

    /// Appends the group's block and syncs it: its transactions are durable.
    pub fn write(&mut self, fs: &mut Fs) -> Result {
        if !self.group.is_empty() {
            let mut block = Vec::with_capacity(8 + self.group.len());
            block.extend_from_slice(&(self.group.len() as u32).to_le_bytes());
            block.extend_from_slice(&epochdb::crc32c::checksum(&self.group).to_le_bytes());
            block.extend_from_slice(&self.group);
            let name = format!("wal.{}", self.segment);
            fs.append(&name, &block)?;
            fs.sync(&name)?;
            self.group.clear();
        }
        self.started = None;
        self.durable = self.committed;
        Ok(())
    }

    pub fn committed(&self) -> u64 {
        self.committed
    }

    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// The blocks of every segment numbered `from` or later, in order, each
    /// with its file's name; appends then go to a new segment, never after
    /// a torn tail.
    pub fn recover(&mut self, fs: &Fs, from: u64) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut segments: Vec<u64> =
            fs.list()?.iter().filter_map(|n| segment_of(n, "wal.")).filter(|&s| s >= from).collect();
        segments.sort_unstable();
        for (i, &s) in segments.iter().enumerate() {
            let name = format!("wal.{s}");
            let data = fs.read(&name)?;
            let mut at = 0;
            while at < data.len() {
                let Some(head) = data.get(at..at + 8) else { break };
                let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
                let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
                let Some(block) = data.get(at + 8..at + 8 + len) else { break };
                if epochdb::crc32c::checksum(block) != crc {
                    break;
                }
                out.push((name.clone(), block.to_vec()));
                at += 8 + len;
            }
            if at < data.len() && i + 1 < segments.len() {
                return Err(corrupt(format!("{name}: corrupt block at offset {at}")));
            }
        }
        self.segment = segments.last().map_or(from, |s| s + 1).max(from);
        Ok(out)
    }
}

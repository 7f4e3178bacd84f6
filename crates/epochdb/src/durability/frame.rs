//! Framing shared by every file epochdb writes (FORMAT.md, "Framing").
//!
//! A file starts with a 16-byte header: an 8-byte magic naming the file
//! kind and the format version. After it come blocks, each a 32-byte header
//! (magic, payload length, epoch range, the header's own CRC32C, the
//! block's CRC32C) and its payload. The CRC lets a reader tell a complete
//! block from a torn or corrupted one, and the header's own CRC whether a
//! damaged block's epoch range can be trusted. The reader reports damage
//! with that range and whether any valid block follows; whether it is a
//! crash's torn tail or corruption, recovery decides (by pepoch).
//!
//! Log and checkpoint files are written with direct I/O ([`BlockWriter`]),
//! which pads every write with zeros up to the next multiple of
//! [`PAD_ALIGN`]; a reader skips such padding after the file header and
//! after each block. Zeros that start at a multiple of
//! `PAD_ALIGN` are the end of the written part (or, with a valid block
//! after them, damage).

use super::fsio::{DataFile, Io};
use crate::crc32c;
use crate::error::Result;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The on-disk format version, in every file header. Version 2 added the
/// zero padding of direct-I/O log files; version 3, delta log entries and
/// the manifest's schemas and checkpoint chain; version 4, the manifest's
/// log and checkpoint directories and checkpoint file names relative to
/// them (so a build that cannot read them says so by version). Versions 1
/// to 3 are still read. Version 5: a single logger's seal markers
/// ([`seal_marker`]) record pepoch in the log, and the pepoch file may
/// trail them (an older build would lose the epochs only they record).
/// Version 6: log records with varint counts and lengths (`log.rs`).
pub const VERSION: u32 = 6;
const OLDEST_READABLE: u32 = 1;
pub const FILE_HEADER_LEN: usize = 16;
pub const BLOCK_HEADER_LEN: usize = 32;
const BLOCK_MAGIC: [u8; 4] = *b"EBLK";
/// Largest payload a reader accepts (a sanity bound on a corrupt length).
pub const MAX_PAYLOAD: usize = 1 << 30;
/// The unit of direct I/O: writes that bypass the page cache start at and
/// span multiples of it.
pub const PAD_ALIGN: u64 = 4096;

/// `n` rounded up to a multiple of [`PAD_ALIGN`].
pub fn padded(n: u64) -> u64 {
    n.div_ceil(PAD_ALIGN) * PAD_ALIGN
}

pub fn file_header(magic: &[u8; 8]) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(magic);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// What is wrong with a file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub path: PathBuf,
    pub offset: u64,
    /// False when a valid block follows the bad one: damage in the middle,
    /// not a write cut short by a crash.
    pub at_tail: bool,
    pub what: String,
    /// The epoch range the bad block's header gives, when the header is
    /// intact (its own checksum holds: a cut-short or corrupt payload);
    /// `None` if the header is damaged or unwritten.
    pub epochs: Option<(u64, u64)>,
    /// The bad block's header is all zeros: never written (the end of the
    /// written part of a preallocated file, with something valid after it).
    pub zeroed: bool,
}

impl Damage {
    /// Damage at the start of a file (its header, or the file as a whole).
    pub fn of_file(path: &Path, what: String) -> Damage {
        Damage { path: path.into(), offset: 0, at_tail: false, what, epochs: None, zeroed: false }
    }

    /// As an error; `salvage` says what salvage would give up, if it helps.
    pub fn error(&self, salvage: Option<String>) -> crate::Error {
        crate::Error::Corrupt { what: self.described("corruption"), salvage }
    }

    /// `"{kind} in FILE at offset N: what"`.
    pub fn described(&self, kind: &str) -> String {
        format!("{kind} in {} at offset {}: {}", self.path.display(), self.offset, self.what)
    }
}

/// Neutral: whether damage is a torn tail or corruption is recovery's to
/// decide (by epochs), not the reader's.
impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.described("damage"))
    }
}

/// Checks a file's header and returns its format version; an error names
/// the file.
pub fn check_file_header(path: &Path, file: &File, magic: &[u8; 8]) -> Result<u32, Damage> {
    let mut h = [0u8; FILE_HEADER_LEN];
    let bad = |what: String| Damage::of_file(path, what);
    file.read_exact_at(&mut h, 0).map_err(|e| bad(format!("cannot read the file header: {e}")))?;
    if &h[..8] != magic {
        return Err(bad(format!("not a {} file", String::from_utf8_lossy(magic))));
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if !(OLDEST_READABLE..=VERSION).contains(&version) {
        return Err(bad(format!("format version {version}; this build reads versions {OLDEST_READABLE} to {VERSION}")));
    }
    Ok(version)
}

/// A buffer that holds one block: space for the header, then the payload.
pub fn new_block(capacity: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(capacity);
    b.resize(BLOCK_HEADER_LEN, 0);
    b
}

/// Fills in the header of a block built with [`new_block`].
pub fn seal(block: &mut [u8], lo: u64, hi: u64) {
    let len = (block.len() - BLOCK_HEADER_LEN) as u32;
    block[..4].copy_from_slice(&BLOCK_MAGIC);
    block[4..8].copy_from_slice(&len.to_le_bytes());
    block[8..16].copy_from_slice(&lo.to_le_bytes());
    block[16..24].copy_from_slice(&hi.to_le_bytes());
    let header_crc = crc32c::checksum(&block[..24]);
    block[24..28].copy_from_slice(&header_crc.to_le_bytes());
    let crc = crc32c::extend(crc32c::checksum(&block[..28]), &block[BLOCK_HEADER_LEN..]);
    block[28..32].copy_from_slice(&crc.to_le_bytes());
}

/// A log's **seal marker**: a block with no payload whose epochs are
/// `epoch..=epoch`, written by the only logger of a database with a flush
/// that publishes `epoch` (when a block above the last marker has been
/// written), just before the sync that makes its epochs `<= epoch` durable.
/// Such a log records its pepoch itself (see `logger::sealed_epoch`), so
/// a release costs one sync, not a second one of the pepoch file.
pub fn seal_marker(epoch: u64) -> Vec<u8> {
    let mut b = new_block(BLOCK_HEADER_LEN);
    seal(&mut b, epoch, epoch);
    b
}

/// Whether a log block (its payload) is a seal marker: no transaction
/// record is empty, so no other block has an empty payload.
pub fn is_seal_marker(payload: &[u8]) -> bool {
    payload.is_empty()
}

/// The first version whose block headers carry their own checksum.
const HEADER_CRC: u32 = 4;

/// Checks a block header: its payload length and epoch range.
fn check_header(h: &[u8; BLOCK_HEADER_LEN], version: u32) -> Result<(usize, u64, u64), Bad> {
    if h.iter().all(|&b| b == 0) {
        return Err(Bad::Zero);
    }
    if h[..4] != BLOCK_MAGIC {
        return Err(Bad::Invalid("bad block magic".into(), None));
    }
    let header_crc = u32::from_le_bytes([h[24], h[25], h[26], h[27]]);
    if version >= HEADER_CRC && crc32c::checksum(&h[..24]) != header_crc {
        return Err(Bad::Invalid("block header checksum mismatch".into(), None));
    }
    let word = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    let (lo, hi) = (word(8), word(16));
    if lo > hi || hi > crate::tid::MAX_EPOCH {
        return Err(Bad::Invalid(format!("impossible epoch range {lo}..={hi}"), None));
    }
    if len > MAX_PAYLOAD {
        return Err(Bad::Invalid(format!("block length {len} over {MAX_PAYLOAD}"), Some((lo, hi))));
    }
    Ok((len, lo, hi))
}

fn check_payload(h: &[u8; BLOCK_HEADER_LEN], payload: &[u8], epochs: Option<(u64, u64)>) -> Result<(), Bad> {
    let crc = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
    if crc32c::extend(crc32c::checksum(&h[..28]), payload) != crc {
        return Err(Bad::Invalid("block checksum mismatch".into(), epochs));
    }
    Ok(())
}

/// Checks a whole sealed block held in memory (one a replication backup
/// received) and returns its epoch range.
pub fn check_block(block: &[u8]) -> Result<(u64, u64), String> {
    let Some((h, payload)) = block.split_first_chunk::<BLOCK_HEADER_LEN>() else {
        return Err(format!("a block of {} bytes is shorter than its header", block.len()));
    };
    let bad = |b: Bad| match b {
        Bad::Zero => "a zeroed block header".to_string(),
        Bad::Invalid(what, _) => what,
    };
    let (len, lo, hi) = check_header(h, VERSION).map_err(bad)?;
    if len != payload.len() {
        return Err(format!("a block header says {len} bytes, the block holds {}", payload.len()));
    }
    check_payload(h, payload, None).map_err(bad)?;
    Ok((lo, hi))
}

/// Writes a framed file: the header, then blocks, each padded with zeros to
/// a multiple of [`PAD_ALIGN`] so that the file can be written with direct
/// I/O, which skips the kernel's copy into the page cache (on 2 cores that
/// copy's CPU time is taken from the workers). Where the file system
/// refuses `O_DIRECT` (tmpfs), the same bytes go through the page cache.
pub struct BlockWriter {
    pub file: DataFile,
    staging: Staging,
    written: u64,
}

impl BlockWriter {
    /// Creates (or truncates) `path`, preallocates `preallocate` bytes
    /// (0: none) and writes the file header.
    pub fn create(path: &Path, magic: &[u8; 8], io: &Io, preallocate: u64) -> Result<BlockWriter> {
        let file = io.create(path, true)?;
        if preallocate > 0 {
            io.preallocate(&file, 0, preallocate)?;
        }
        let mut w = BlockWriter { file, staging: Staging::default(), written: 0 };
        w.append(io, &file_header(magic))?;
        Ok(w)
    }

    /// Writes `bytes` (a sealed block, or the header) and its padding at
    /// the end of the written part.
    pub fn append(&mut self, io: &Io, bytes: &[u8]) -> Result<()> {
        self.append_all(io, &[bytes])
    }

    /// Writes several blocks back to back, padded after the last, with one
    /// write (a flush's last block and its seal marker share a page).
    pub fn append_all(&mut self, io: &Io, blocks: &[&[u8]]) -> Result<()> {
        let out = self.staging.fill(blocks);
        io.write_at(&self.file, out, self.written)?;
        self.written += out.len() as u64;
        Ok(())
    }

    /// Bytes written, padding included: the file's length once trimmed.
    pub fn written(&self) -> u64 {
        self.written
    }
}

/// A buffer whose contents start at a `PAD_ALIGN` boundary, as direct I/O
/// needs. A `Vec` makes no alignment promise, so it holds `PAD_ALIGN` bytes
/// more than asked and the aligned part is used.
#[derive(Default)]
struct Staging {
    bytes: Vec<u8>,
}

impl Staging {
    /// Copies `blocks` back to back into the aligned part, pads them with
    /// zeros to a multiple of `PAD_ALIGN`, and returns the padded bytes.
    fn fill(&mut self, blocks: &[&[u8]]) -> &[u8] {
        let data = blocks.iter().map(|b| b.len()).sum::<usize>();
        let len = padded(data as u64) as usize;
        let align = PAD_ALIGN as usize;
        if self.bytes.len() < len + align {
            self.bytes = vec![0; len + align];
        }
        let start = self.bytes.as_ptr().align_offset(align);
        let out = &mut self.bytes[start..start + len];
        let mut at = 0;
        for b in blocks {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        out[at..].fill(0);
        out
    }
}

/// Why a block at some offset is not valid.
enum Bad {
    /// All-zero header: the end of the written part of a preallocated file.
    Zero,
    /// What is wrong, and the header's epoch range if the header is intact.
    Invalid(String, Option<(u64, u64)>),
}

/// Where a block's payload is checked.
enum Payload<'p> {
    /// Not checked (unless empty): only the header.
    Skip,
    /// Read into the buffer, then checked.
    Read(&'p mut Vec<u8>),
    /// Checked in place in the file's mapping (its bytes from offset 0)
    /// where it covers the block; otherwise read as by `Read`.
    Mapped(&'p [u8], &'p mut Vec<u8>),
}

/// Reads the blocks of one file in order.
pub struct BlockReader {
    file: File,
    path: PathBuf,
    version: u32,
    offset: u64,
    len: u64,
    header: [u8; BLOCK_HEADER_LEN],
}

impl BlockReader {
    /// Opens `path` and checks its header.
    pub fn open(path: &Path, magic: &[u8; 8]) -> Result<BlockReader, Damage> {
        let file = File::open(path).map_err(|e| Damage::of_file(path, format!("cannot open: {e}")))?;
        let version = check_file_header(path, &file, magic)?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(BlockReader { file, path: path.into(), version, offset: FILE_HEADER_LEN as u64, len, header: [0; 32] })
    }

    /// Whether the file is shorter now than when it was opened: another
    /// handle cut it (a cleanup frees a file from its end, step by step,
    /// before unlinking it), so a clean end seen since may be early.
    pub fn shrank(&self) -> bool {
        self.file.metadata().map_or(true, |m| m.len() < self.len)
    }

    /// The file's format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Where the next block would start: after a clean end, the length of
    /// the valid data.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next block; `Ok(None)` at a clean end; `Err` at a bad block (the
    /// reader then stands at the bad block; see [`BlockReader::skip_to_next_valid`]).
    pub fn next_block(&mut self, payload: &mut Vec<u8>) -> Result<Option<(u64, u64, u64)>, Damage> {
        Ok(self.next(Payload::Read(payload))?.map(|(at, lo, hi, _)| (at, lo, hi)))
    }

    /// Like [`BlockReader::next_block`] for a file also mapped whole
    /// (`mapped`, its bytes from offset 0): the payload is checked where it
    /// lies in the mapping, not copied, and `payload` is left empty; only a
    /// block the mapping does not cover is read into `payload`. Returns
    /// `(offset, lo, hi, payload length)`; the same damage as `next_block`.
    pub fn next_block_in(
        &mut self,
        mapped: &[u8],
        payload: &mut Vec<u8>,
    ) -> Result<Option<(u64, u64, u64, usize)>, Damage> {
        self.next(Payload::Mapped(mapped, payload))
    }

    /// Like [`BlockReader::next_block`], but checks only the next block's
    /// header (and, for a block without payload, its whole checksum) and
    /// skips its payload unread: `(offset, lo, hi, payload length)`. A
    /// damaged payload goes unnoticed; callers check the blocks that matter
    /// with `next_block` after [`BlockReader::seek`].
    pub fn next_header(&mut self) -> Result<Option<(u64, u64, u64, usize)>, Damage> {
        self.next(Payload::Skip)
    }

    /// The next block, its payload checked as `payload` says.
    fn next(&mut self, payload: Payload<'_>) -> Result<Option<(u64, u64, u64, usize)>, Damage> {
        self.skip_padding();
        if self.offset + BLOCK_HEADER_LEN as u64 > self.len {
            if self.offset == self.len {
                return Ok(None);
            }
            return self.damage("a block header cut short".into(), None);
        }
        match self.try_read(self.offset, payload) {
            Ok((lo, hi, len)) => {
                let at = self.offset;
                self.offset += (BLOCK_HEADER_LEN + len) as u64;
                Ok(Some((at, lo, hi, len)))
            }
            Err(Bad::Zero) if self.next_valid(self.offset).is_none() => Ok(None),
            Err(Bad::Zero) => {
                self.damage("a zeroed block header".into(), None).map_err(|d| Damage { zeroed: true, ..d })
            }
            Err(Bad::Invalid(what, epochs)) => self.damage(what, epochs),
        }
    }

    /// Moves the reader to `offset`, a block's start that an earlier pass
    /// returned.
    pub fn seek(&mut self, offset: u64) {
        self.offset = offset;
    }

    /// Moves past zero padding: from an offset that is not a multiple of
    /// [`PAD_ALIGN`], if every byte up to the next multiple is zero.
    fn skip_padding(&mut self) {
        let next = padded(self.offset).min(self.len);
        if next == self.offset {
            return;
        }
        let mut buf = [0u8; PAD_ALIGN as usize];
        let gap = &mut buf[..(next - self.offset) as usize];
        if self.file.read_exact_at(gap, self.offset).is_ok() && gap.iter().all(|&b| b == 0) {
            self.offset = next;
        }
    }

    fn damage<T>(&self, what: String, epochs: Option<(u64, u64)>) -> Result<T, Damage> {
        let at_tail = self.next_valid(self.offset + 1).is_none();
        Err(Damage { path: self.path.clone(), offset: self.offset, at_tail, what, epochs, zeroed: false })
    }

    /// Moves past a bad block to the next valid one (salvage); false if none.
    pub fn skip_to_next_valid(&mut self) -> bool {
        match self.next_valid(self.offset + 1) {
            Some(at) => {
                self.offset = at;
                true
            }
            None => {
                self.offset = self.len;
                false
            }
        }
    }

    /// Checks the block at `at` and its payload as `payload` says:
    /// `(lo, hi, length)`.
    fn try_read(&mut self, at: u64, payload: Payload<'_>) -> Result<(u64, u64, usize), Bad> {
        let io = |e: io::Error| Bad::Invalid(format!("read failed: {e}"), None);
        self.file.read_exact_at(&mut self.header, at).map_err(io)?;
        let (len, lo, hi) = check_header(&self.header, self.version)?;
        let epochs = Some((lo, hi));
        if at + (BLOCK_HEADER_LEN + len) as u64 > self.len {
            return Err(Bad::Invalid(format!("block length {len} runs past the end of the file"), epochs));
        }
        let start = at + BLOCK_HEADER_LEN as u64;
        let (payload, in_map) = match payload {
            Payload::Skip if len == 0 => return check_payload(&self.header, &[], epochs).map(|()| (lo, hi, len)),
            Payload::Skip => return Ok((lo, hi, len)),
            Payload::Read(payload) => (payload, None),
            Payload::Mapped(m, payload) => {
                (payload, usize::try_from(start).ok().and_then(|s| m.get(s..s.checked_add(len)?)))
            }
        };
        payload.clear();
        let bytes = match in_map {
            Some(bytes) => bytes,
            None => {
                payload.resize(len, 0);
                self.file.read_exact_at(payload, start).map_err(io)?;
                payload
            }
        };
        check_payload(&self.header, bytes, epochs)?;
        Ok((lo, hi, len))
    }

    /// The offset of the first valid block at or after `from`. Only on the
    /// error path: scans the rest of the file for a block magic, a window
    /// at a time (so memory stays bounded however long the file).
    fn next_valid(&self, from: u64) -> Option<u64> {
        const WINDOW: u64 = 1 << 20;
        let mut probe = BlockReader {
            file: self.file.try_clone().ok()?,
            path: self.path.clone(),
            version: self.version,
            offset: 0,
            len: self.len,
            header: [0; 32],
        };
        let (mut window, mut scratch) = (Vec::new(), Vec::new());
        let mut start = from;
        while start + 4 <= self.len {
            // Windows overlap by 3 bytes, so no magic straddles two unseen.
            let len = WINDOW.min(self.len - start) as usize;
            window.resize(len, 0);
            self.file.read_exact_at(&mut window, start).ok()?;
            for i in 0..len.saturating_sub(3) {
                let at = start + i as u64;
                if window[i..i + 4] == BLOCK_MAGIC && probe.try_read(at, Payload::Read(&mut scratch)).is_ok() {
                    return Some(at);
                }
            }
            start += (len as u64).saturating_sub(3).max(1);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(blocks: &[&[u8]], tail: &[u8]) -> (TestFile, Vec<u64>) {
        file_with_padding(blocks, tail, false)
    }

    /// A test's file, removed when the test is done with it.
    struct TestFile(PathBuf);

    impl std::ops::Deref for TestFile {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl AsRef<Path> for TestFile {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TestFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A test file; with `pad`, zeros follow the file header and each block
    /// up to the next multiple of `PAD_ALIGN`, as the log writes them.
    fn file_with_padding(blocks: &[&[u8]], tail: &[u8], pad: bool) -> (TestFile, Vec<u64>) {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("epochdb-frame-{}-{n}", std::process::id()));
        let mut f = File::create(&path).expect("create");
        f.write_all(&file_header(b"EPOCHTST")).expect("write");
        let mut offsets = Vec::new();
        let mut at = FILE_HEADER_LEN as u64;
        let pad_to_alignment = |f: &mut File, at: &mut u64| {
            if pad {
                f.write_all(&vec![0; (padded(*at) - *at) as usize]).expect("write");
                *at = padded(*at);
            }
        };
        pad_to_alignment(&mut f, &mut at);
        for (i, p) in blocks.iter().enumerate() {
            let mut b = new_block(64);
            b.extend_from_slice(p);
            seal(&mut b, i as u64, i as u64 + 1);
            f.write_all(&b).expect("write");
            offsets.push(at);
            at += b.len() as u64;
            pad_to_alignment(&mut f, &mut at);
        }
        f.write_all(tail).expect("write");
        (TestFile(path), offsets)
    }

    fn read_all(path: &Path) -> (Vec<Vec<u8>>, Option<Damage>) {
        let mut r = BlockReader::open(path, b"EPOCHTST").expect("open");
        let mut out = Vec::new();
        let mut p = Vec::new();
        loop {
            match r.next_block(&mut p) {
                Ok(Some(_)) => out.push(p.clone()),
                Ok(None) => return (out, None),
                Err(d) => return (out, Some(d)),
            }
        }
    }

    /// [`read_all`] by `next_block_in`, over the file's first `cut` bytes
    /// as its mapping (the rest read from the file).
    fn read_all_mapped(path: &Path, cut: usize) -> (Vec<Vec<u8>>, Option<Damage>) {
        let bytes = std::fs::read(path).expect("read");
        let map = &bytes[..cut.min(bytes.len())];
        let mut r = BlockReader::open(path, b"EPOCHTST").expect("open");
        let (mut out, mut p) = (Vec::new(), Vec::new());
        loop {
            match r.next_block_in(map, &mut p) {
                Ok(Some((at, _, _, len))) => {
                    let start = at as usize + BLOCK_HEADER_LEN;
                    out.push(map.get(start..start + len).map_or_else(|| p.clone(), <[u8]>::to_vec));
                }
                Ok(None) => return (out, None),
                Err(d) => return (out, Some(d)),
            }
        }
    }

    /// Checking a block's payload where it lies in a mapping finds the
    /// blocks and the damage that reading it finds, and where the mapping
    /// is short, reads the rest.
    #[test]
    fn checking_blocks_in_a_mapping_finds_what_reading_them_does() {
        let damaged = |change: &dyn Fn(&mut Vec<u8>, &[u64])| {
            let (path, offs) = file_with(&[b"one", b"two", b"three"], &[0; 100]);
            let mut bytes = std::fs::read(&path).expect("read");
            change(&mut bytes, &offs);
            std::fs::write(&path, &bytes).expect("write");
            (path, offs)
        };
        let files = [
            damaged(&|_, _| {}),
            damaged(&|b, offs| b.truncate(offs[2] as usize + BLOCK_HEADER_LEN + 2)),
            damaged(&|b, offs| b[offs[1] as usize + BLOCK_HEADER_LEN] ^= 1),
        ];
        for (path, offs) in &files {
            let read = read_all(path);
            for cut in [usize::MAX, offs[1] as usize + BLOCK_HEADER_LEN + 1, 0] {
                assert_eq!(read_all_mapped(path, cut), read, "mapping cut at {cut}");
            }
        }
        assert_eq!(read_all(&files[0].0).0.len(), 3);
        assert!(read_all(&files[1].0).1.is_some_and(|d| d.at_tail));
        assert!(read_all(&files[2].0).1.is_some_and(|d| !d.at_tail));
    }

    /// A file cut at a block boundary through another handle reads short;
    /// `shrank` tells a clean end there from a whole file's (catch-ups
    /// rely on it, see `replication/primary.rs`).
    #[test]
    fn a_file_cut_under_a_reader_reads_short_and_shrank_says_so() {
        let (path, offs) = file_with(&[b"one", b"two", b"three"], &[]);
        let mut r = BlockReader::open(&path, b"EPOCHTST").expect("open");
        let mut p = Vec::new();
        assert!(matches!(r.next_block(&mut p), Ok(Some(_))));
        assert!(!r.shrank());
        File::options().write(true).open(&path).expect("open").set_len(offs[1]).expect("cut");
        // The reader knew the old length: the missing block reads as a
        // torn one, or, cut at its start, as a clean end.
        assert!(!matches!(r.next_block(&mut p), Ok(Some(_))));
        assert!(r.shrank());
    }

    #[test]
    fn clean_end_torn_tail_and_middle_corruption() {
        let (path, _) = file_with(&[b"one", b"two"], &[0; 100]);
        assert_eq!(read_all(&path), (vec![b"one".to_vec(), b"two".to_vec()], None));

        let (path, offs) = file_with(&[b"one", b"two"], &[]);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.truncate(bytes.len() - 1);
        std::fs::write(&path, &bytes).expect("write");
        let (got, d) = read_all(&path);
        assert_eq!(got, vec![b"one".to_vec()]);
        let d = d.expect("damage");
        assert!(d.at_tail && d.offset == offs[1], "{d}");

        let (path, offs) = file_with(&[b"one", b"two", b"three"], &[]);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[offs[1] as usize + BLOCK_HEADER_LEN] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let (got, d) = read_all(&path);
        assert_eq!(got, vec![b"one".to_vec()]);
        let d = d.expect("damage");
        assert!(!d.at_tail && d.offset == offs[1], "{d}");
        let mut r = BlockReader::open(&path, b"EPOCHTST").expect("open");
        let mut p = Vec::new();
        assert!(r.next_block(&mut p).is_ok());
        assert!(r.next_block(&mut p).is_err());
        assert!(r.skip_to_next_valid());
        assert_eq!(r.next_block(&mut p).expect("ok").map(|b| b.1), Some(2));
        assert_eq!(p, b"three");
    }

    /// Zero padding after the header and after each block is skipped;
    /// zeros that start at an aligned offset end the file, or are damage if
    /// a valid block follows them.
    #[test]
    fn padding_is_skipped_and_aligned_zeros_end_the_file() {
        let (path, offsets) = file_with_padding(&[b"one", b"two"], &[], true);
        assert_eq!(offsets, vec![PAD_ALIGN, 2 * PAD_ALIGN]);
        assert_eq!(read_all(&path), (vec![b"one".to_vec(), b"two".to_vec()], None));
        let (path, _) = file_with_padding(&[b"one", b"two"], &[0; 100], true);
        assert_eq!(read_all(&path).0.len(), 2, "trailing zeros are the unwritten end");
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[PAD_ALIGN as usize..PAD_ALIGN as usize + 64].fill(0); // the first block's header and some payload
        std::fs::write(&path, &bytes).expect("write");
        let (read, damage) = read_all(&path);
        assert!(read.is_empty());
        let d = damage.expect("zeros with a valid block after them are damage");
        assert!(!d.at_tail && d.offset == PAD_ALIGN, "{d}");
    }

    #[test]
    fn wrong_magic_or_version_is_named() {
        let (path, _) = file_with(&[], &[]);
        let e = BlockReader::open(&path, b"EPOCHLOG").err().expect("wrong kind");
        assert!(e.what.contains("not a EPOCHLOG"), "{e}");
    }
}

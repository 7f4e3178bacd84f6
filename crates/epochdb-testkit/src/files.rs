//! Reading a data directory's files back, for tests.

use std::path::{Path, PathBuf};

/// Every file under `dir`, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// Every file under `dir` with its bytes: to show that something wrote
/// nothing.
pub fn snapshot_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_under(dir).into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("read"))).collect()
}

/// The offsets of the blocks of a framed file (FORMAT.md): after the
/// 16-byte file header, with or without zero padding to 4 KiB after the
/// header and each block.
pub fn block_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 16;
    let mut v = Vec::new();
    loop {
        if at + 32 <= bytes.len() && &bytes[at..at + 4] == b"EBLK" {
            v.push(at);
            at += 32 + u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize;
        } else if at % 4096 != 0 && at.next_multiple_of(4096) + 4 <= bytes.len() {
            at = at.next_multiple_of(4096); // padding
            if &bytes[at..at + 4] != b"EBLK" {
                return v;
            }
        } else {
            return v;
        }
    }
}

/// The payload length a block's header gives (0: a seal marker).
pub fn block_len(bytes: &[u8], at: usize) -> usize {
    u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize
}

/// The epochs a block's header gives.
pub fn block_epochs(bytes: &[u8], at: usize) -> (u64, u64) {
    let word = |i: usize| u64::from_le_bytes(bytes[at + i..at + i + 8].try_into().expect("8"));
    (word(8), word(16))
}

//! The file-system seam. Every change epochdb makes to its files — create,
//! write, preallocate, truncate, sync, rename, remove, make a directory —
//! goes through [`Io`], for two reasons:
//!
//! - a failure becomes an [`Error::Io`] that names the operation and the
//!   path (`fdatasync db/log/data.log: Input/output error`), never a bare
//!   OS error;
//! - tests inject faults into real files through [`Faults`]: fail the
//!   n-th write, sync or other operation, cut the n-th write short, or fill
//!   the disk from the n-th allocation on. Every operation is counted, so a
//!   test can fail each one of a run in turn.

use crate::error::{Error, Result};
use crate::faults::{Fault, Faults, Op};
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// What [`Io::remove_gradually`] frees per step: unlinking 6 GiB of
/// written files took 0.79–0.88 s here, so a step holds ext4 about 5 ms.
const FREE_STEP: u64 = 32 << 20;
const FREE_PAUSE: Duration = Duration::from_millis(2);

fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// `Err` of an I/O failure: the operation, the path, the OS's error.
pub fn failed<T>(op: &'static str, path: &Path, source: io::Error) -> Result<T> {
    Err(Error::Io { op, path: path.into(), source })
}

/// Adds the operation and path to an `io::Result`.
pub trait Context<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T>;
}

impl<T> Context<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T> {
        self.or_else(|e| failed(op, path, e))
    }
}

/// A file epochdb writes, with its path (for errors) and whether it was
/// opened for direct I/O (whose writes must stay 512-byte aligned).
#[derive(Debug)]
pub struct DataFile {
    pub file: std::fs::File,
    pub path: PathBuf,
    direct: bool,
}

impl DataFile {
    /// Another handle on the same open file (a helper thread writes
    /// through it).
    pub fn try_clone(&self) -> Result<DataFile> {
        let file = self.file.try_clone().ctx("dup", &self.path)?;
        Ok(DataFile { file, path: self.path.clone(), direct: self.direct })
    }
}

/// Durable I/O for one database: real files, optionally with faults.
#[derive(Debug, Clone, Default)]
pub struct Io {
    faults: Option<Arc<Faults>>,
}

impl Io {
    pub fn new(faults: Option<Arc<Faults>>) -> Io {
        Io { faults }
    }

    /// Counts an operation; `Err` if an injected fault fails it outright.
    fn check(&self, op: Op, what: &'static str, path: &Path) -> Result<Option<Fault>> {
        let Some(f) = &self.faults else { return Ok(None) };
        match f.hit(op) {
            Some(Fault::WriteError | Fault::SyncError | Fault::MetaError) => failed(what, path, os_error(libc::EIO)),
            Some(Fault::DiskFull) if op == Op::Allocate => failed(what, path, os_error(libc::ENOSPC)),
            other => Ok(other),
        }
    }

    /// Creates (or truncates) `path` for writing; `direct` asks for
    /// `O_DIRECT`, which falls back to the page cache where the file
    /// system refuses it (tmpfs).
    pub fn create(&self, path: &Path, direct: bool) -> Result<DataFile> {
        self.check(Op::Meta, "create", path)?;
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(true).truncate(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(path)
        };
        let (file, direct) = match open(direct) {
            Ok(f) => (f, direct),
            Err(_) if direct => (open(false).ctx("create", path)?, false),
            Err(e) => return failed("create", path, e),
        };
        Ok(DataFile { file, path: path.into(), direct })
    }

    /// Opens an existing file for writing (not truncated), or creates it.
    pub fn open_write(&self, path: &Path) -> Result<DataFile> {
        self.check(Op::Meta, "open", path)?;
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).ctx("open", path)?;
        Ok(DataFile { file, path: path.into(), direct: false })
    }

    /// Writes all of `buf` at `offset`.
    pub fn write_at(&self, f: &DataFile, buf: &[u8], offset: u64) -> Result<()> {
        let fault = self.check(Op::Write, "write", &f.path)?;
        // The bytes a fault lets through: part of a short write, or what
        // fits on a full disk (whole sectors under direct I/O).
        let sector = |n: usize| if f.direct { n - n % 512 } else { n };
        let cut = match fault {
            Some(Fault::ShortWrite) => Some((sector(buf.len() / 2), libc::EIO)),
            Some(Fault::DiskFull) => Some((0, libc::ENOSPC)),
            _ => self.faults.as_ref().and_then(|faults| {
                let fits = faults.take_space(buf.len() as u64) as usize;
                (fits < buf.len()).then(|| (fits - fits % super::frame::PAD_ALIGN as usize, libc::ENOSPC))
            }),
        };
        if let Some((len, code)) = cut {
            f.file.write_all_at(&buf[..len], offset).ctx("write", &f.path)?;
            return failed("write", &f.path, os_error(code));
        }
        f.file.write_all_at(buf, offset).ctx("write", &f.path)
    }

    /// `fdatasync`.
    pub fn sync(&self, f: &DataFile) -> Result<()> {
        self.sync_file(&f.file, &f.path)
    }

    fn sync_file(&self, file: &std::fs::File, path: &Path) -> Result<()> {
        self.check(Op::Sync, "fdatasync", path)?;
        if let Some(f) = &self.faults {
            let left = f.syncs_left.load(Ordering::SeqCst);
            if left == 0 {
                return failed("fdatasync", path, os_error(libc::EIO));
            }
            if left != u64::MAX {
                f.syncs_left.store(left - 1, Ordering::SeqCst);
            }
        }
        file.sync_data().ctx("fdatasync", path)
    }

    /// Allocates `[offset, offset + len)` of `f` (zero-filled), so later
    /// writes there need no block allocation and a full disk shows up here.
    pub fn preallocate(&self, f: &DataFile, offset: u64, len: u64) -> Result<()> {
        self.check(Op::Allocate, "fallocate", &f.path)?;
        if let Some(faults) = &self.faults {
            if faults.take_space(len) < len {
                return failed("fallocate", &f.path, os_error(libc::ENOSPC));
            }
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor; fallocate only reads its arguments.
        let r = unsafe { libc::fallocate(f.file.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            // e.g. tmpfs
            let now = f.file.metadata().ctx("fallocate", &f.path)?.len();
            return f.file.set_len(now.max(offset + len)).ctx("fallocate", &f.path);
        }
        failed("fallocate", &f.path, e)
    }

    /// Cuts `f` to `len` bytes.
    pub fn truncate(&self, f: &DataFile, len: u64) -> Result<()> {
        self.check(Op::Meta, "truncate", &f.path)?;
        f.file.set_len(len).ctx("truncate", &f.path)
    }

    pub fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(Op::Meta, "rename", from)?;
        std::fs::rename(from, to).ctx("rename", from)
    }

    pub fn remove_file(&self, path: &Path) -> Result<()> {
        self.check(Op::Meta, "remove", path)?;
        std::fs::remove_file(path).ctx("remove", path)
    }

    /// Removes an empty directory.
    pub fn remove_dir(&self, path: &Path) -> Result<()> {
        self.check(Op::Meta, "remove directory", path)?;
        std::fs::remove_dir(path).ctx("remove directory", path)
    }

    /// Creates `dir` and its parents. A path that exists as a file is an
    /// error naming it.
    pub fn create_dir_all(&self, dir: &Path) -> Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        self.check(Op::Meta, "create directory", dir)?;
        std::fs::create_dir_all(dir).ctx("create directory", dir)
    }

    /// Writes `path` atomically: a temporary file, synced, renamed over
    /// `path`, then the directory synced.
    pub fn replace_file(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let tmp = path.with_extension("tmp");
        let file = self.create(&tmp, false)?;
        self.write_at(&file, bytes, 0)?;
        self.sync(&file)?;
        self.rename(&tmp, path)?;
        self.sync_dir(path.parent().unwrap_or(Path::new(".")))
    }

    /// Removes a file the database no longer needs, freeing it from the end
    /// a step at a time. Unlinking gigabytes of written file at once keeps
    /// ext4 busy for hundreds of milliseconds, and the loggers' syncs wait
    /// behind it while a worker's log buffers last about 15 ms. Each step
    /// is synced, then the loggers get a pause to sync in.
    pub fn remove_gradually(&self, path: &Path) -> Result<()> {
        let file = self.open_write(path)?;
        let mut len = file.file.metadata().ctx("stat", path)?.len();
        while len > 0 {
            len = len.saturating_sub(FREE_STEP);
            self.truncate(&file, len)?;
            self.sync(&file)?;
            std::thread::sleep(FREE_PAUSE);
        }
        self.remove_file(path)
    }

    /// Makes renames and creations in `dir` durable.
    pub fn sync_dir(&self, dir: &Path) -> Result<()> {
        let file = std::fs::File::open(dir).ctx("open directory", dir)?;
        self.sync_file(&file, dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("epochdb-fsio-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn faults_fail_syncs_and_fill_the_disk() {
        let dir = temp("faults");
        let faults = Faults::new();
        let io = Io::new(Some(faults.clone()));
        let file = io.create(&dir.join("f"), false).expect("create");
        faults.fail_syncs_after(1);
        assert!(io.sync(&file).is_ok());
        let e = io.sync(&file).expect_err("failed sync");
        assert!(e.to_string().starts_with("fdatasync ") && e.to_string().contains("/f:"), "{e}");
        faults.disk_space(4096 + 10);
        let e = io.write_at(&file, &[1; 3 * 4096], 0).expect_err("full");
        assert!(matches!(&e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)), "{e}");
        assert_eq!(std::fs::read(dir.join("f")).expect("read").len(), 4096, "the whole blocks that fit are written");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn an_injected_fault_hits_exactly_the_nth_operation_of_its_kind() {
        let dir = temp("nth");
        let faults = Faults::new();
        let io = Io::new(Some(faults.clone()));
        let file = io.create(&dir.join("f"), false).expect("create");
        faults.inject(Fault::WriteError, 2);
        io.write_at(&file, b"one", 0).expect("first write");
        io.sync(&file).expect("syncs are not counted");
        assert!(io.write_at(&file, b"two", 3).is_err() && faults.fired());
        io.write_at(&file, b"three", 3).expect("a one-shot fault");
        faults.inject(Fault::ShortWrite, 1);
        assert!(io.write_at(&file, b"abcdefgh", 8).is_err());
        assert_eq!(std::fs::read(dir.join("f")).expect("read"), b"onethreeabcd", "half of the short write landed");
        faults.inject(Fault::DiskFull, 1);
        assert!(io.write_at(&file, b"x", 0).is_err() && io.preallocate(&file, 0, 10).is_err(), "stays full");
        faults.inject(Fault::MetaError, 1);
        assert!(io.rename(&dir.join("f"), &dir.join("g")).is_err() && dir.join("f").exists());
        assert_eq!(faults.count(Op::Meta), 2, "the create and the rename");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_gradual_removal_frees_a_synced_step_at_a_time() {
        let dir = temp("rm");
        let path = dir.join("old");
        let faults = Faults::new();
        let io = Io::new(Some(faults.clone()));
        std::fs::File::create(&path).and_then(|f| f.set_len(3 * FREE_STEP + 5)).expect("sparse file");
        // The second step's sync fails: the error is returned and the file
        // is left one step shorter.
        faults.fail_syncs_after(1);
        assert!(io.remove_gradually(&path).is_err());
        assert_eq!(std::fs::metadata(&path).expect("kept").len(), FREE_STEP + 5);
        faults.fail_syncs_after(u64::MAX);
        io.remove_gradually(&path).expect("remove");
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! The file-system seam: every durable write, preallocation and sync goes
//! through here, so tests can inject failed syncs and a full disk
//! ([`Faults`]) into real files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Faults to inject into the data directory's I/O, for tests. Shared by
/// every file the database writes.
#[derive(Debug)]
pub struct Faults {
    syncs_left: AtomicU64,
    space_left: AtomicU64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults { syncs_left: AtomicU64::new(u64::MAX), space_left: AtomicU64::new(u64::MAX) }
    }
}

impl Faults {
    pub fn new() -> Arc<Faults> {
        Arc::new(Faults::default())
    }

    /// The next `n` syncs succeed; every later one fails with EIO.
    pub fn fail_syncs_after(&self, n: u64) {
        self.syncs_left.store(n, Ordering::SeqCst);
    }

    /// Only `bytes` more bytes fit on the disk; then writes fail with ENOSPC
    /// (after writing what fits, as a real full disk does).
    pub fn disk_space(&self, bytes: u64) {
        self.space_left.store(bytes, Ordering::SeqCst);
    }

    /// Takes `want` bytes of space; returns how many fit.
    fn take_space(&self, want: u64) -> u64 {
        let mut left = self.space_left.load(Ordering::SeqCst);
        loop {
            let got = want.min(left);
            match self.space_left.compare_exchange(left, left - got, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return got,
                Err(now) => left = now,
            }
        }
    }
}

/// What [`Io::remove_gradually`] frees per step: unlinking 6 GiB of
/// written files took 0.79–0.88 s here, so a step holds ext4 about 5 ms.
const FREE_STEP: u64 = 32 << 20;
const FREE_PAUSE: Duration = Duration::from_millis(2);

fn full_disk() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
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

    /// Writes all of `buf` at `offset`.
    pub fn write_at(&self, file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(f) = &self.faults {
            let fits = f.take_space(buf.len() as u64) as usize;
            if fits < buf.len() {
                // A full disk takes what fits, in whole blocks (as direct
                // I/O requires).
                let blocks = fits - fits % crate::frame::PAD_ALIGN as usize;
                file.write_all_at(&buf[..blocks], offset)?;
                return Err(full_disk());
            }
        }
        file.write_all_at(buf, offset)
    }

    /// `fdatasync`.
    pub fn sync(&self, file: &File) -> io::Result<()> {
        if let Some(f) = &self.faults {
            let left = f.syncs_left.load(Ordering::SeqCst);
            if left == 0 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            if left != u64::MAX {
                f.syncs_left.store(left - 1, Ordering::SeqCst);
            }
        }
        file.sync_data()
    }

    /// Allocates `[offset, offset + len)` of `file` (zero-filled), so later
    /// writes there need no block allocation and a full disk shows up here.
    pub fn preallocate(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        if let Some(f) = &self.faults {
            if f.take_space(len) < len {
                return Err(full_disk());
            }
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor; fallocate only reads its arguments.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            return file.set_len(file.metadata()?.len().max(offset + len)); // e.g. tmpfs
        }
        Err(e)
    }

    /// Writes `path` atomically: a temporary file, synced, renamed over
    /// `path`, then the directory synced.
    pub fn replace_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let tmp = path.with_extension("tmp");
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        self.write_at(&file, bytes, 0)?;
        self.sync(&file)?;
        std::fs::rename(&tmp, path)?;
        self.sync_dir(path.parent().unwrap_or(Path::new(".")))
    }

    /// Removes a file the database no longer needs, freeing it from the end
    /// a step at a time. Unlinking gigabytes of written file at once keeps
    /// ext4 busy for hundreds of milliseconds, and the loggers' syncs wait
    /// behind it while a worker's log buffers last about 15 ms. Each step
    /// is synced, then the loggers get a pause to sync in.
    pub fn remove_gradually(&self, path: &Path) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        let mut len = file.metadata()?.len();
        while len > 0 {
            len = len.saturating_sub(FREE_STEP);
            file.set_len(len)?;
            self.sync(&file)?;
            std::thread::sleep(FREE_PAUSE);
        }
        std::fs::remove_file(path)
    }

    /// Makes renames and creations in `dir` durable.
    pub fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.sync(&File::open(dir)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_fail_syncs_and_fill_the_disk() {
        let dir = std::env::temp_dir().join(format!("epochdb-fsio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let faults = Faults::new();
        let io = Io::new(Some(faults.clone()));
        let file = File::create(dir.join("f")).expect("create");
        faults.fail_syncs_after(1);
        assert!(io.sync(&file).is_ok());
        assert!(io.sync(&file).is_err());
        faults.disk_space(4096 + 10);
        let e = io.write_at(&file, &[1; 3 * 4096], 0).expect_err("full");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(std::fs::read(dir.join("f")).expect("read").len(), 4096, "the whole blocks that fit are written");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_gradual_removal_frees_a_synced_step_at_a_time() {
        let dir = std::env::temp_dir().join(format!("epochdb-fsio-rm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("old");
        let faults = Faults::new();
        let io = Io::new(Some(faults.clone()));
        File::create(&path).and_then(|f| f.set_len(3 * FREE_STEP + 5)).expect("sparse file");
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
